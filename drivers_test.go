package claimcheck_test

// The store drivers the root package's tests open: s3:// against SeaweedFS
// (s3_test.go, presign_test.go) and against fault-injecting proxies
// (causes_test.go). The root package itself imports none (driver.go).
import _ "github.com/claimcheck/claimcheck/stores/s3store"
