//go:build gcs

package cli

// gs:// stores, compiled in with the build tag gcs (stores.go).

import _ "github.com/claimcheck/claimcheck/stores/gcsstore" // gs://

// gcsCompiled: the command opens gs:// stores.
var gcsCompiled = true
