package console

import (
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// TokenCookie is the cookie the login page sets: the token itself,
// HttpOnly and SameSite=Strict, checked by the Gate on every request like
// an Authorization header.
const TokenCookie = "claimcheck_console_token"

// guard wraps the console's handler: security headers on every answer,
// same-origin state changes (CrossOriginProtection), and the Gate.
func (c *Console) guard(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.refuse(w, r, http.StatusForbidden, "cross-origin request refused: the console's actions must come from its own pages")
	}))
	gated := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !c.allowed(w, r) {
			return
		}
		next.ServeHTTP(w, r)
	})
	protected := cop.Handler(gated)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		protected.ServeHTTP(w, r)
	})
}

// allowed applies the Gate: a local request passes; any other needs a
// token (Authorization: Bearer, or the login cookie) that Verify accepts.
// The login page itself is open, so a user from elsewhere can give one. It
// writes the refusal and returns false otherwise.
func (c *Console) allowed(w http.ResponseWriter, r *http.Request) bool {
	if c.local(r) {
		return true
	}
	if r.URL.Path == PathPrefix+"login" || strings.HasPrefix(r.URL.Path, PathPrefix+"static/") {
		return true
	}
	token := requestToken(r)
	if token == "" {
		c.refuse(w, r, http.StatusUnauthorized, "this console answers requests from other hosts only with a token: send Authorization: Bearer TOKEN, or log in at "+PathPrefix+"login")
		return false
	}
	if err := c.o.Gate.Verify(r.Context(), token); err != nil {
		c.refuse(w, r, http.StatusForbidden, "token refused: "+err.Error())
		return false
	}
	return true
}

// local is the Gate's Local, and the Host the request names is this host
// too: a browser tricked by DNS rebinding (a site's name resolving to
// 127.0.0.1) sends its own site's name, so its request is not local.
func (c *Console) local(r *http.Request) bool {
	return c.o.Gate.Local(r) && LoopbackHost(r.Host)
}

// LoopbackHost reports whether a Host header (host or host:port) names
// this host: "localhost" (or a name under .localhost, RFC 6761), or a
// loopback IP address: 127.0.0.0/8, ::1, or ::ffff:127.0.0.0/104.
func LoopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	a, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && a.Unmap().IsLoopback()
}

// LoopbackPeer reports whether a request's peer address (RemoteAddr,
// ip:port) is a loopback address: 127.0.0.0/8 (all of it, not only
// 127.0.0.1), ::1, or an IPv4-mapped 127.x. Headers such as
// X-Forwarded-For are never read: any client can send them.
func LoopbackPeer(remoteAddr string) bool {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return false
	}
	return ap.Addr().Unmap().IsLoopback()
}

// requestToken is the bearer token of r, or its login cookie's value.
func requestToken(r *http.Request) string {
	if scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		return strings.TrimSpace(tok)
	}
	if ck, err := r.Cookie(TokenCookie); err == nil {
		return ck.Value
	}
	return ""
}

// loginForm shows the token form.
func (c *Console) loginForm(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusOK, "login", page{Title: "Log in"})
}

// login checks the token given in the form and keeps it in the cookie.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	token := strings.TrimSpace(r.PostFormValue("token"))
	var err error
	if token == "" {
		err = errors.New("no token given")
	} else {
		err = c.o.Gate.Verify(r.Context(), token)
	}
	if err != nil {
		c.render(w, r, http.StatusForbidden, "login", page{Title: "Log in", Error: "token refused: " + err.Error()})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: TokenCookie, Value: token, Path: "/", HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, PathPrefix, http.StatusSeeOther)
}
