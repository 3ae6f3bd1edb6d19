package temporal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/claimcheck/claimcheck"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

const (
	// DriverType is the driver's Type(): the same for every instance.
	DriverType = "claimcheck"
	// DefaultName is the driver's Name() when Options.Name is empty. The
	// name is written into the history beside every claim, and Temporal
	// picks the driver to retrieve with by it: a deployed driver's name must
	// never change.
	DefaultName = "claimcheck"
	// ClaimKey is the one key of a claim's ClaimData: its value is the
	// payload's claimcheck ticket, JSON (docs/ticket.md).
	ClaimKey = "ticket"
	// ContentType is the media type recorded in every ticket and on every
	// object the driver stores: a commonpb.Payload's protobuf encoding.
	ContentType = "application/x-protobuf"
	// DefaultMaxPayloadSize, 2 GiB - 1 bytes, is protobuf's limit on an
	// encoded message, and so the largest payload Retrieve reads when
	// Options.MaxPayloadSize is 0.
	DefaultMaxPayloadSize = 1<<31 - 1
)

// Options configure a Driver.
type Options struct {
	// Tenant is the claimcheck tenant every payload is checked in under
	// (claimcheck.ValidateTenant: 1–48 bytes of a-z, 0-9, '-', '_'), for
	// every Temporal namespace not in Namespaces. Retrieve reads any tenant
	// the store serves (the tenant is in each ticket;
	// claimcheck.Options.Tenants limits it).
	Tenant string
	// Namespaces maps a Temporal namespace to the claimcheck tenant its
	// payloads are checked in under, so that each namespace's objects live
	// apart (payloads/<tenant>/...: their own keys, lifecycle rules, sweep
	// and, with a deployment secret, their own key salt). Store reads the
	// namespace of the workflow or activity it stores for
	// (StorageDriverStoreContext.Target). A namespace not in the map takes
	// Tenant; with Tenant empty it is refused (claimcheck.ErrTicketForbidden,
	// permanent), as is a store call that names no namespace. At least one
	// of Tenant and Namespaces is required.
	Namespaces map[string]string
	// Name is the driver's Name(), DefaultName when empty (a-z, 0-9, '-',
	// '_'; at most 48 bytes). Give two drivers over two stores two names.
	Name string
	// MaxPayloadSize, in bytes, is the largest stored payload Retrieve reads
	// into memory; a claim for a larger one fails with
	// claimcheck.ErrPayloadTooLarge before anything is fetched. 0 means
	// DefaultMaxPayloadSize. Limit check-ins with the store's own
	// claimcheck.Options.MaxPayloadSize.
	MaxPayloadSize int64
}

// Driver is a Temporal External Storage driver over a claimcheck Store. It
// is safe for concurrent use. Create it with New.
type Driver struct {
	store      *claimcheck.Store
	tenant     string
	namespaces map[string]string
	name       string
	max        int64
}

var _ converter.StorageDriver = (*Driver)(nil)

// New returns a driver that checks payloads into store under opts.Tenant.
// The driver does not own store: close it after the Temporal clients and
// workers that use the driver.
//
// Errors: claimcheck.ErrConfig for a nil store, no tenant at all, an
// invalid tenant, namespace mapping or name, or a negative MaxPayloadSize.
func New(store *claimcheck.Store, opts Options) (*Driver, error) {
	if store == nil {
		return nil, fmt.Errorf("claimcheck temporal driver: no store: %w", claimcheck.ErrConfig)
	}
	if opts.Tenant == "" && len(opts.Namespaces) == 0 {
		return nil, fmt.Errorf("claimcheck temporal driver: no tenant: set Options.Tenant, Options.Namespaces or both: %w", claimcheck.ErrConfig)
	}
	if opts.Tenant != "" {
		if err := claimcheck.ValidateTenant(opts.Tenant); err != nil {
			return nil, fmt.Errorf("claimcheck temporal driver: tenant: %v: %w", err, claimcheck.ErrConfig)
		}
	}
	namespaces := make(map[string]string, len(opts.Namespaces))
	for ns, tenant := range opts.Namespaces {
		if ns == "" {
			return nil, fmt.Errorf("claimcheck temporal driver: Namespaces: an empty namespace: %w", claimcheck.ErrConfig)
		}
		if err := claimcheck.ValidateTenant(tenant); err != nil {
			return nil, fmt.Errorf("claimcheck temporal driver: Namespaces[%q]: %v: %w", ns, err, claimcheck.ErrConfig)
		}
		namespaces[ns] = tenant
	}
	name := opts.Name
	if name == "" {
		name = DefaultName
	}
	// A driver name has the same alphabet as a tenant.
	if err := claimcheck.ValidateTenant(name); err != nil {
		return nil, fmt.Errorf("claimcheck temporal driver: name: %v: %w", err, claimcheck.ErrConfig)
	}
	limit := opts.MaxPayloadSize
	switch {
	case limit < 0:
		return nil, fmt.Errorf("claimcheck temporal driver: MaxPayloadSize %d is negative: %w", limit, claimcheck.ErrConfig)
	case limit == 0:
		limit = DefaultMaxPayloadSize
	}
	return &Driver{store: store, tenant: opts.Tenant, namespaces: namespaces, name: name, max: limit}, nil
}

// Name is the driver's name (Options.Name or DefaultName).
func (d *Driver) Name() string { return d.name }

// Type is DriverType.
func (d *Driver) Type() string { return DriverType }

// Store checks each payload into the store under the tenant of ctx's
// namespace (Options.Namespaces, else Options.Tenant) and returns one claim
// per payload, in order. Payloads are stored concurrently, each under a
// permit of ctx's limiter. Equal payloads land on one object (content
// address); storing again, as Temporal does when it retries a task, writes
// nothing new and returns an equal claim.
//
// Errors name the payload's position and wrap claimcheck's: ErrUnavailable,
// ErrAccessDenied or ErrKeeper (transient); ErrPayloadTooLarge past the
// store's MaxPayloadSize and ErrTicketForbidden for a namespace with no
// tenant (permanent). A failed Store leaves no object at a final key for the
// payload that failed.
func (d *Driver) Store(ctx converter.StorageDriverStoreContext, payloads []*commonpb.Payload) ([]converter.StorageDriverClaim, error) {
	tenant, err := d.TenantOf(ctx.Target)
	if err != nil {
		return nil, fmt.Errorf("claimcheck temporal driver %q: store %d payloads: %w", d.name, len(payloads), err)
	}
	claims := make([]converter.StorageDriverClaim, len(payloads))
	limiter := ctx.GetLimiter()
	g, gctx := errgroup.WithContext(ctxOf(ctx.Context))
	for i, p := range payloads {
		g.Go(func() error {
			return limiter.Permit(gctx, p, func() error {
				c, err := d.store1(gctx, tenant, p)
				if err != nil {
					return fmt.Errorf("claimcheck temporal driver %q: store payload %d of %d: %w", d.name, i+1, len(payloads), err)
				}
				claims[i] = c
				return nil
			})
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return claims, nil
}

// TenantOf returns the claimcheck tenant Store checks payloads in under for
// target: Options.Namespaces[namespace], else Options.Tenant. Errors: a
// namespace with neither (or a target naming none, when Tenant is empty)
// wraps claimcheck.ErrTicketForbidden, permanent.
func (d *Driver) TenantOf(target converter.StorageDriverTargetInfo) (string, error) {
	var ns string
	switch t := target.(type) {
	case converter.StorageDriverWorkflowInfo:
		ns = t.Namespace
	case converter.StorageDriverActivityInfo:
		ns = t.Namespace
	case *converter.StorageDriverWorkflowInfo:
		ns = t.Namespace
	case *converter.StorageDriverActivityInfo:
		ns = t.Namespace
	}
	if tenant, ok := d.namespaces[ns]; ok && ns != "" {
		return tenant, nil
	}
	if d.tenant != "" {
		return d.tenant, nil
	}
	if ns == "" {
		return "", fmt.Errorf("the store call names no Temporal namespace and the driver has no default Tenant: %w", claimcheck.ErrTicketForbidden)
	}
	return "", fmt.Errorf("the Temporal namespace %q has no claimcheck tenant (Options.Namespaces) and the driver has no default Tenant: %w", ns, claimcheck.ErrTicketForbidden)
}

func (d *Driver) store1(ctx context.Context, tenant string, p *commonpb.Payload) (converter.StorageDriverClaim, error) {
	if p == nil {
		return converter.StorageDriverClaim{}, fmt.Errorf("nil payload: %w", claimcheck.ErrTicketInvalid)
	}
	r, err := encodePayload(p)
	if err != nil {
		return converter.StorageDriverClaim{}, err
	}
	t, err := d.store.CheckIn(ctx, tenant, r, &claimcheck.CheckInOptions{ContentType: ContentType, Offload: true})
	if err != nil {
		return converter.StorageDriverClaim{}, err
	}
	b, err := t.Marshal()
	if err != nil {
		return converter.StorageDriverClaim{}, err
	}
	return converter.StorageDriverClaim{ClaimData: map[string]string{ClaimKey: string(b)}}, nil
}

// Retrieve claims each claim's payload, verifies it (size and SHA-256,
// decrypting a sealed object) and returns the payloads in order. Claims are
// retrieved concurrently, each under a permit of ctx's limiter. It does not
// modify claims.
//
// Errors name the claim's position and wrap claimcheck's classes, permanent:
// ErrTicketInvalid for a claim that does not parse (or a stored object that
// is not a payload's encoding: ErrPayloadCorrupt), ErrPayloadMissing,
// ErrPayloadCorrupt, ErrTicketForbidden, ErrPayloadTooLarge past
// Options.MaxPayloadSize; transient: ErrUnavailable (ErrNotVisibleYet within
// the store's NotFoundGrace), ErrAccessDenied, ErrKeeper.
func (d *Driver) Retrieve(ctx converter.StorageDriverRetrieveContext, claims []converter.StorageDriverClaim) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(claims))
	limiter := ctx.GetLimiter()
	g, gctx := errgroup.WithContext(ctxOf(ctx.Context))
	for i, c := range claims {
		g.Go(func() error {
			return limiter.Permit(gctx, c, func() error {
				p, err := d.retrieve1(gctx, c)
				if err != nil {
					return fmt.Errorf("claimcheck temporal driver %q: retrieve payload %d of %d: %w", d.name, i+1, len(claims), err)
				}
				out[i] = p
				return nil
			})
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

func (d *Driver) retrieve1(ctx context.Context, c converter.StorageDriverClaim) (*commonpb.Payload, error) {
	t, err := ParseClaim(c)
	if err != nil {
		return nil, err
	}
	if t.Size > d.max {
		return nil, fmt.Errorf("claim %s: %d bytes, more than the driver's MaxPayloadSize of %d: %w", t, t.Size, d.max, claimcheck.ErrPayloadTooLarge)
	}
	pl, err := d.store.Claim(t)
	if err != nil {
		return nil, err
	}
	defer pl.Close()
	// OpenStream reads the object once, without a spool file; its reader
	// returns ErrPayloadCorrupt instead of io.EOF unless size and SHA-256
	// match, so nothing is decoded before the end is read.
	r, err := pl.OpenStream(ctx)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	buf := make([]byte, t.Size)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, readError(t, err)
	}
	var one [1]byte
	if n, err := r.Read(one[:]); n != 0 || err != io.EOF {
		if err == nil || err == io.EOF {
			err = fmt.Errorf("claim %s: more bytes than the ticket's size: %w", t, claimcheck.ErrPayloadCorrupt)
		}
		return nil, readError(t, err)
	}
	p, err := decodePayload(buf)
	if err != nil {
		return nil, fmt.Errorf("claim %s: the verified object is not a Temporal payload's encoding: %v: %w", t, err, claimcheck.ErrPayloadCorrupt)
	}
	return p, nil
}

// readError keeps claimcheck's error (it names its class) and says what a
// bare short read means: an object shorter than its ticket.
func readError(t *claimcheck.Ticket, err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return fmt.Errorf("claim %s: fewer bytes than the ticket's size: %w", t, claimcheck.ErrPayloadCorrupt)
	}
	return err
}

// ParseClaim returns the ticket a claim holds. A claim whose ClaimData is
// not exactly {ClaimKey: ticket JSON}, or whose ticket does not parse
// (claimcheck.ParseTicket), fails with an error wrapping
// claimcheck.ErrTicketInvalid that says which; a ticket longer than
// claimcheck.MaxEncodedTicketBytes is refused unread.
func ParseClaim(c converter.StorageDriverClaim) (*claimcheck.Ticket, error) {
	s, ok := c.ClaimData[ClaimKey]
	switch {
	case !ok:
		return nil, fmt.Errorf("claim has no %q entry (%d entries; not a claimcheck driver's claim?): %w", ClaimKey, len(c.ClaimData), claimcheck.ErrTicketInvalid)
	case len(c.ClaimData) != 1:
		return nil, fmt.Errorf("claim has %d entries, want only %q: %w", len(c.ClaimData), ClaimKey, claimcheck.ErrTicketInvalid)
	case len(s) > claimcheck.MaxEncodedTicketBytes:
		return nil, fmt.Errorf("claim's ticket is %d bytes, more than %d: %w", len(s), claimcheck.MaxEncodedTicketBytes, claimcheck.ErrTicketInvalid)
	}
	t, err := claimcheck.ParseTicket([]byte(s))
	if err != nil {
		return nil, fmt.Errorf("claim's ticket: %w", err)
	}
	if t.IsInline() {
		// The driver always offloads: an inline ticket here was not
		// written by it.
		return nil, fmt.Errorf("claim's ticket is inline (%d bytes), the driver stores every payload as an object: %w", t.Size, claimcheck.ErrTicketInvalid)
	}
	return t, nil
}

// encodePayload returns a reader over p's protobuf encoding, its data field
// last: the deterministic encoding of p without its data, then the data
// field's tag, length and bytes, read from p.Data itself (not copied).
// Protobuf decoders merge fields in any order, so this is an encoding of p
// that any of them reads.
func encodePayload(p *commonpb.Payload) (io.Reader, error) {
	rest := &commonpb.Payload{Metadata: p.GetMetadata(), ExternalPayloads: p.GetExternalPayloads()}
	rest.ProtoReflect().SetUnknown(p.ProtoReflect().GetUnknown())
	head, err := proto.MarshalOptions{Deterministic: true}.Marshal(rest)
	if err != nil {
		return nil, fmt.Errorf("encode payload: %w", err)
	}
	if len(p.GetData()) == 0 {
		return bytes.NewReader(head), nil
	}
	head = protowire.AppendTag(head, dataField, protowire.BytesType)
	head = protowire.AppendVarint(head, uint64(len(p.GetData())))
	return io.MultiReader(bytes.NewReader(head), bytes.NewReader(p.GetData())), nil
}

// dataField is commonpb.Payload's data field number.
const dataField = 2

// decodePayload decodes a Payload from b, its data field aliasing b (no
// copy): every field but data is decoded by proto.Unmarshal.
func decodePayload(b []byte) (*commonpb.Payload, error) {
	var rest []byte
	var data []byte
	hasData := false
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		if num == dataField && typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(b[n:])
			if m < 0 {
				return nil, protowire.ParseError(m)
			}
			data, hasData = v, true // the last one wins, as protobuf's does
			b = b[n+m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return nil, protowire.ParseError(m)
		}
		rest = append(rest, b[:n+m]...)
		b = b[n+m:]
	}
	p := &commonpb.Payload{}
	if err := proto.Unmarshal(rest, p); err != nil {
		return nil, err
	}
	if hasData && len(data) > 0 {
		p.Data = data
	}
	return p, nil
}

// ctxOf returns ctx, or context.Background for a nil one.
func ctxOf(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}
