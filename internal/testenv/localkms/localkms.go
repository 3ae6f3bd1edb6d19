// Package localkms gives tests local-kms (github.com/nsmithuk/local-kms),
// an AWS KMS emulator that scripts/local-kms.sh runs on loopback: a KMS
// client to create, disable and enable keys with, and the awskms:// keeper
// URL of a key for gocloud.dev/secrets (or claimcheck --keeper).
//
// local-kms has no IAM: it answers any credentials, and unsigned requests.
// The keeper URLs are anonymous, so the SDK looks for no credentials
// (environment, metadata service).
package localkms

import (
	"net/url"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/claimcheck/claimcheck/internal/testenv"
)

// EndpointEnv names the environment variable holding local-kms's endpoint,
// RegionEnv its region (default us-east-1); scripts/local-kms.sh env
// prints both.
const (
	EndpointEnv = "CLAIMCHECK_TEST_KMS_ENDPOINT"
	RegionEnv   = "CLAIMCHECK_TEST_KMS_REGION"
)

// How is what to run to get local-kms.
const How = `scripts/local-kms.sh build && scripts/local-kms.sh start && eval "$(scripts/local-kms.sh env)"`

// KMS is local-kms as a test sees it.
type KMS struct {
	Endpoint, Region string
	Client           *kms.Client
}

// New returns local-kms, skipping t (failing it under CI) when EndpointEnv
// is not set (testenv.Require).
func New(t testing.TB) *KMS {
	t.Helper()
	endpoint := testenv.Require(t, EndpointEnv, How)
	region := os.Getenv(RegionEnv)
	if region == "" {
		region = "us-east-1"
	}
	return &KMS{Endpoint: endpoint, Region: region, Client: kms.New(kms.Options{
		Region:       region,
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("local-kms", "local-kms", ""),
	})}
}

// CreateKey makes a symmetric encryption key and returns its id (a UUID).
func (l *KMS) CreateKey(t testing.TB) string {
	t.Helper()
	out, err := l.Client.CreateKey(t.Context(), &kms.CreateKeyInput{Description: aws.String("claimcheck test " + t.Name())})
	if err != nil {
		t.Fatalf("CreateKey on local-kms: %v", err)
	}
	return aws.ToString(out.KeyMetadata.KeyId)
}

// Disable disables keyID (DisableKey): encrypting and decrypting with it
// fail until Enable.
func (l *KMS) Disable(t testing.TB, keyID string) {
	t.Helper()
	if _, err := l.Client.DisableKey(t.Context(), &kms.DisableKeyInput{KeyId: aws.String(keyID)}); err != nil {
		t.Fatalf("DisableKey on local-kms: %v", err)
	}
}

// Enable enables keyID again (EnableKey).
func (l *KMS) Enable(t testing.TB, keyID string) {
	t.Helper()
	if _, err := l.Client.EnableKey(t.Context(), &kms.EnableKeyInput{KeyId: aws.String(keyID)}); err != nil {
		t.Fatalf("EnableKey on local-kms: %v", err)
	}
}

// KeeperURL is the awskms:// URL of keyID on local-kms (region, endpoint,
// anonymous), for secrets.OpenKeeper or claimcheck --keeper.
func (l *KMS) KeeperURL(keyID string) string {
	q := url.Values{"region": {l.Region}, "endpoint": {l.Endpoint}, "anonymous": {"true"}}
	return "awskms://" + keyID + "?" + q.Encode()
}
