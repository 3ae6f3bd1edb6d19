package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck"
)

// keysOptions are the options of `claimcheck keys`.
type keysOptions struct {
	g      *globals
	newKey bool
}

// Validate refuses --keeper (other than none) without --new: that URL is
// the key already, and keys prints only the data directory's key file.
func (o *keysOptions) Validate() error {
	if !o.newKey && o.g.keeper != "" && o.g.keeper != "none" {
		return usagef("--keeper (or CLAIMCHECK_KEEPER) is set: that is the key; keys prints only the data directory's key file")
	}
	return nil
}

// keysJSON is what `keys --json` prints.
type keysJSON struct {
	Keeper string `json:"keeper"`
	KeyID  string `json:"key_id"`
	File   string `json:"file,omitempty"`
}

func newKeys(g *globals) *cobra.Command {
	o := &keysOptions{g: g}
	c := &cobra.Command{
		Use:   "keys [--new]",
		Short: "Print the data directory's payload key in the form --keeper takes, to share it with other hosts",
		Long: `Print the key-encryption key of the data directory (<data>/keys/kek.key, the
default keeper) as a keeper URL, base64key://KEY, and its key id on standard
error. The key file is made on first use, as submit makes it, unless the
deployment (--store, --database) already holds sealed payloads: then the
lost file must be restored, and keys says so. Every host of one deployment must use the same key: pass the URL as
--keeper (or CLAIMCHECK_KEEPER) on the others, or copy the key file to
<data>/keys/kek.key there (the file is readable by base64key:// as it is).

--new prints a fresh random key instead, and writes nothing: keep it in your
secret store and give it to every host with --keeper.

The output is the secret itself: do not paste it into tickets, logs or chat.
A KMS keeper (awskms://...) needs no copying: use the same URL everywhere.`,
		Args: exactArgs(0, "no arguments"),
		RunE: runE(o, nil),
	}
	c.Flags().BoolVar(&o.newKey, "new", false, "print a fresh random key (base64key://...) and write nothing")
	return c
}

func (o *keysOptions) run(ctx context.Context, s streams) error {
	g := o.g
	var out keysJSON
	if o.newKey {
		text, err := newKeyText()
		if err != nil {
			return err
		}
		out.Keeper = "base64key://" + text
	} else {
		data, err := filepath.Abs(g.data)
		if err != nil {
			return fmt.Errorf("data directory %q: %w", g.data, err)
		}
		out.File = keyFilePath(data)
		if _, err := os.Stat(out.File); errors.Is(err, os.ErrNotExist) {
			if err := ensureWritable(data); err != nil {
				return err
			}
		}
		// Made on first use as submit makes it, and refused in the same
		// case: a deployment that holds sealed data needs its key restored.
		k, _, err := g.openKeeper(ctx, data, false)
		if err != nil {
			return err
		}
		k.Close()
		key, err := localKey(data, keyFileName, nil)
		if err != nil {
			return err
		}
		out.Keeper = "base64key://" + encodeKey(key)
	}
	id, err := claimcheck.KeeperID(out.Keeper)
	if err != nil {
		return err
	}
	out.KeyID = id
	if g.json {
		return printJSON(s.out, out)
	}
	fmt.Fprintln(s.out, out.Keeper)
	where := "a new key, written nowhere"
	if out.File != "" {
		where = "from " + out.File
	}
	fmt.Fprintf(s.err, "claimcheck: key id %s (%s); this is the secret key: give it to every host of the deployment as --keeper or CLAIMCHECK_KEEPER\n", id, where)
	return nil
}
