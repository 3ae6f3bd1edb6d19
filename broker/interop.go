package broker

// Interoperability with the AWS payload-offloading ("extended client")
// libraries and with SNS notification envelopes.
//
// Sources read for the formats below (public repositories and AWS docs):
//
//   - awslabs/payload-offloading-java-common-lib-for-aws,
//     src/main/java/software/amazon/payloadoffloading/PayloadS3Pointer.java
//     and JsonDataConverter.java: PayloadS3Pointer has two fields,
//     s3BucketName and s3Key, and toJson() serialises it with a Jackson
//     ObjectMapper configured with enableDefaultTyping(DefaultTyping.NON_FINAL),
//     whose default inclusion is a wrapper array: the body is
//     ["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"…","s3Key":"…"}].
//     FAIL_ON_UNKNOWN_PROPERTIES is off, so readers ignore extra fields.
//   - awslabs/amazon-sqs-java-extended-client-lib,
//     SQSExtendedClientConstants.java: RESERVED_ATTRIBUTE_NAME =
//     "ExtendedPayloadSize" ("This constant is shared with
//     SNSExtendedClient"), MAX_S3_KEY_LENGTH = 1024; and
//     AmazonSQSExtendedClientUtil.java: LEGACY_RESERVED_ATTRIBUTE_NAME =
//     "SQSLargePayloadSize", getReservedAttributeNameIfPresent (the current
//     name is looked up first, then the legacy one: presence of the name is
//     what marks a pointer), updateMessageAttributePayloadSize (the marker is
//     written with dataType("Number") and stringValue(size.toString()), the
//     size of the original payload in bytes), checkMessageAttributes (user
//     attributes may not use a reserved name; at most 10-1 of them).
//   - awslabs/amazon-sqs-java-extended-client-lib,
//     AmazonSQSExtendedClientSnsTest.java: an SNS envelope whose "Message"
//     is the pointer JSON, with the marker as an SQS message attribute.
//   - awslabs/amazon-sns-java-extended-client-lib,
//     AmazonSNSExtendedClientUtil.java: the SNS client uses the SQS client's
//     RESERVED_ATTRIBUTE_NAME and the same PayloadS3Pointer.
//   - awslabs/amazon-sqs-python-extended-client-lib,
//     src/sqs_extended_client/client.py: RESERVED_ATTRIBUTE_NAME =
//     'ExtendedPayloadSize', LEGACY_RESERVED_ATTRIBUTE_NAME =
//     'SQSLargePayloadSize', MESSAGE_POINTER_CLASS =
//     'software.amazon.payloadoffloading.PayloadS3Pointer',
//     LEGACY_MESSAGE_POINTER_CLASS =
//     'com.amazon.sqs.javamessaging.MessageS3Pointer' (written together with
//     the legacy attribute name when use_legacy_attribute is set); the body
//     is dumps([message_pointer, {"s3BucketName": …, "s3Key": …}]) and the
//     marker {"DataType": "Number", "StringValue": str(len(encoded_body))};
//     readers require a two-element list whose second element is a dict.
//   - Amazon SNS Developer Guide, "HTTP/HTTPS notification JSON format" and
//     "Amazon SNS raw message delivery": without raw delivery a subscriber
//     receives a JSON object with "Type":"Notification", "MessageId",
//     "TopicArn", optional "Subject", "Message" (the published string),
//     "Timestamp", "SignatureVersion", "Signature", "SigningCertURL",
//     "UnsubscribeURL" and "MessageAttributes":{"name":{"Type":"String",
//     "Value":"…"}} (Type also "Number", "Binary" (base64), "String.Array").
//
// What the pointer format lacks: it names an object (bucket and key) and,
// in an attribute, its size, but carries no digest and no tenant. A
// consumer cannot verify end to end that the object it reads is the one the
// producer wrote: an overwritten or truncated-then-padded object of the same
// size passes every check the format allows. claimcheck's answer: when it
// writes this format (Pointer.Message) it adds AttrSHA256, the payload's
// SHA-256, and AttrTenant, so claimcheck consumers verify the digest and
// route by tenant exactly as for a ticket, while AWS readers, which look only
// for the marker attribute and the body, ignore them. A foreign pointer
// (written by the Java or Python libraries) has neither: Pointer.SHA256 is
// empty and only its size can be checked.
//
// Caveats of writing the format: an AWS consumer reads the object's bytes as
// the payload, so a pointer is only useful to it when the object is stored
// in plaintext (not with claimcheck's client-side encryption) in a bucket it
// can read; and the AWS clients delete that object when they acknowledge
// the message (DeleteMessage; the Java, Python and Go clients by default),
// so NewPointer points at a copy the message owns, never at the shared
// content-addressed object. The marker is written with
// DataType Number, as the AWS clients write it (Message.Types), and the SQS
// transport keeps that type on every copy, dead letters included; AWS
// readers test the marker by name only (getReservedAttributeNameIfPresent,
// `RESERVED_ATTRIBUTE_NAME in message_attributes`).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/claimcheck/claimcheck"
)

// Names of the AWS payload-offloading format.
const (
	// AttrPayloadSize is the marker attribute the current Java and Python
	// extended clients write: its value is the original payload's size in
	// bytes. Pointer.Message writes this name.
	AttrPayloadSize = "ExtendedPayloadSize"
	// AttrLegacyPayloadSize is the older marker name, still read by the
	// current libraries and written by them in legacy mode.
	AttrLegacyPayloadSize = "SQSLargePayloadSize"
	// PointerClass is the first element of a pointer body: the Java class
	// name Jackson's default typing writes.
	PointerClass = "software.amazon.payloadoffloading.PayloadS3Pointer"
	// LegacyPointerClass is the class name the Python client writes in
	// legacy mode. Read, never written.
	LegacyPointerClass = "com.amazon.sqs.javamessaging.MessageS3Pointer"
	// AttrSHA256 is claimcheck's addition to the format: the lowercase hex
	// SHA-256 of the payload, so claimcheck consumers can verify it.
	AttrSHA256 = "claimcheck-sha256"
)

// Limits of the pointer format.
const (
	// maxS3KeyLen is S3's key length limit (MAX_S3_KEY_LENGTH in the Java
	// client).
	maxS3KeyLen = 1024
	// maxPointerBody bounds what ParsePointer reads: a 1024-byte key, each
	// byte escaped as \u00XX, plus bucket and class name, fits well within.
	maxPointerBody = 16 << 10
	// maxAWSAttributes is SQS's limit on message attributes per message;
	// the extended clients keep one of them for the marker.
	maxAWSAttributes = 10
)

// Pointer is an AWS payload-offloading pointer: the object holding a
// payload and the payload's size.
type Pointer struct {
	// Bucket and Key name the S3 object holding the payload.
	Bucket string
	Key    string
	// Size is the payload's size in bytes, from the marker attribute.
	Size int64
	// SHA256 is the payload's lowercase hex SHA-256 from AttrSHA256, set
	// only on pointers claimcheck wrote. Empty for foreign pointers: their
	// payload can only be size-checked.
	SHA256 string
	// Tenant is the AttrTenant attribute, if any (claimcheck-written
	// pointers have one; foreign ones do not).
	Tenant string
	// Marker is the marker attribute the size was read from
	// (AttrPayloadSize or AttrLegacyPayloadSize; "" for an S3Payload
	// pointer without one), and the one Message writes: AttrPayloadSize
	// when empty, the current Java and Python clients' name;
	// AttrLegacyPayloadSize for consumers that recognise only the legacy
	// name (the npm package sns-sqs-big-payload; the AWS Java client with
	// its defaults also writes it).
	Marker string
	// Body is the body form Message writes: PointerBodyAWS (the default
	// when empty) or PointerBodyS3Payload.
	Body string
}

// Pointer body forms (Pointer.Body, the broker URL parameter
// pointer_body).
const (
	// PointerBodyAWS is the AWS extended clients' body: a JSON array of
	// PointerClass and {"s3BucketName","s3Key"}.
	PointerBodyAWS = "aws"
	// PointerBodyS3Payload is the npm package sns-sqs-big-payload's
	// default body (S3PayloadField), which its consumer reads in both of
	// its modes when no legacy marker is present.
	PointerBodyS3Payload = "s3payload"
)

// String is the redacted form for error strings and logs: bucket, size and
// digest prefix, never the key.
func (p *Pointer) String() string {
	d := p.SHA256
	if len(d) > 12 {
		d = d[:12]
	}
	if d == "" {
		d = "none"
	}
	return fmt.Sprintf("bucket=%s size=%d sha256=%s", p.Bucket, p.Size, d)
}

// Verifiable reports whether the pointer carries a digest (claimcheck wrote
// it), so the payload can be verified and not only size-checked.
func (p *Pointer) Verifiable() bool { return p.SHA256 != "" }

// pointerFields is the second element of a pointer body. Field order is
// Jackson's (declaration order), so Message writes what the Java client
// writes byte for byte.
type pointerFields struct {
	Bucket *string `json:"s3BucketName"`
	Key    *string `json:"s3Key"`
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("broker: "+format+": %w", append(args, claimcheck.ErrTicketInvalid)...)
}

// unrecognisedError is DecodeBody's error for a body that is none of the
// formats it knows and does not try to be one (no "v", no "S3Payload", no
// pointer class): what an AWS-format producer sends as a raw payload
// below its threshold (ConsumeOptions.RawTenant). It wraps
// ErrTicketInvalid like every DecodeBody error.
type unrecognisedError struct{ err error }

func (e *unrecognisedError) Error() string { return e.err.Error() }
func (e *unrecognisedError) Unwrap() error { return e.err }

func unrecognisedf(format string, args ...any) error {
	return &unrecognisedError{invalidf(format, args...)}
}

// Unrecognised reports whether err (from DecodeBody) is that of a body in
// none of the formats DecodeBody knows, rather than a malformed ticket,
// pointer or envelope: such a body may be a raw payload
// (ConsumeOptions.RawTenant).
func Unrecognised(err error) bool {
	var u *unrecognisedError
	return errors.As(err, &u)
}

// ParsePointer reads an AWS payload-offloading pointer from a message body
// and its attributes. The body must be the two-element JSON array written by
// the Java and Python extended clients, [PointerClass or LegacyPointerClass,
// {"s3BucketName":…,"s3Key":…}] (unknown fields in the object are ignored,
// as Jackson ignores them), and a marker attribute, AttrPayloadSize or
// AttrLegacyPayloadSize, must hold the payload's size as a non-negative
// decimal integer (if both are present they must agree). AttrSHA256 and
// AttrTenant, when present, must be valid and are returned. Every failure
// wraps claimcheck.ErrTicketInvalid; error strings never contain the key.
func ParsePointer(body []byte, attrs map[string]string) (*Pointer, error) {
	if len(body) > maxPointerBody {
		return nil, invalidf("pointer body of %d bytes exceeds %d", len(body), maxPointerBody)
	}
	var elems []json.RawMessage
	if err := decodeOne(body, &elems); err != nil {
		return nil, invalidf("not an AWS payload pointer: %s", err)
	}
	if len(elems) != 2 {
		return nil, invalidf("AWS payload pointer has %d elements, want 2", len(elems))
	}
	var class string
	if err := json.Unmarshal(elems[0], &class); err != nil {
		return nil, invalidf("AWS payload pointer: first element is not a class name")
	}
	if class != PointerClass && class != LegacyPointerClass {
		return nil, invalidf("AWS payload pointer: unknown class %q", truncate(class, 80))
	}
	if t := firstByte(elems[1]); t != '{' {
		return nil, invalidf("AWS payload pointer: second element is not an object")
	}
	// Field names are matched exactly, as Jackson matches them (Go's
	// encoding/json would also accept other cases).
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(elems[1], &fields); err != nil {
		return nil, invalidf("AWS payload pointer: %s", describeJSON(err))
	}
	bucket, err := exactString(fields, "s3BucketName")
	if err != nil {
		return nil, err
	}
	key, err := exactString(fields, "s3Key")
	if err != nil {
		return nil, err
	}
	p := &Pointer{Bucket: bucket, Key: key}
	if err := checkLocation(p.Bucket, p.Key); err != nil {
		return nil, err
	}
	if p.Size, p.Marker, err = markerSize(attrs); err != nil {
		return nil, err
	}
	if err := p.claimcheckAttrs(attrs); err != nil {
		return nil, err
	}
	return p, nil
}

// exactString is the non-empty string field name of a pointer object.
func exactString(fields map[string]json.RawMessage, name string) (string, error) {
	raw, ok := fields[name]
	if !ok {
		return "", invalidf("AWS payload pointer: no %s", name)
	}
	var v string
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", invalidf("AWS payload pointer: field %q has the wrong type", name)
	}
	if v == "" {
		return "", invalidf("AWS payload pointer: no %s", name)
	}
	return v, nil
}

// S3PayloadField is the one field of the pointer body the npm package
// sns-sqs-big-payload writes by default (not in its
// extendedLibraryCompatibility mode, which writes the AWS format with the
// legacy marker): {"S3Payload":{"Id":…,"Bucket":…,"Key":…,"Location":…}}
// (sns-sqs-big-payload 0.1.4, dist/util.js buildS3Payload and
// dist/sqs-producer.js sendS3Payload: Id is the uuid the key is made of,
// Location the S3 URL the upload returned; no message attribute).
const S3PayloadField = "S3Payload"

// s3PayloadFields is the object inside an S3Payload body.
type s3PayloadFields struct {
	ID       *string `json:"Id"`
	Bucket   *string `json:"Bucket"`
	Key      *string `json:"Key"`
	Location *string `json:"Location"`
}

// ParseS3Payload reads the npm package sns-sqs-big-payload's default
// pointer body (S3PayloadField): a JSON object whose field "S3Payload" is
// an object with non-empty strings "Bucket" and "Key" and, optionally,
// strings "Id" and "Location" (other fields are ignored, as the package's
// consumer ignores them; names are matched exactly). The format carries no
// size: Size is -1 unless a marker attribute (AttrPayloadSize or
// AttrLegacyPayloadSize) gives it. AttrSHA256 and AttrTenant are read as
// ParsePointer reads them. Every failure wraps claimcheck.ErrTicketInvalid;
// error strings never contain the key.
func ParseS3Payload(body []byte, attrs map[string]string) (*Pointer, error) {
	if len(body) > maxPointerBody {
		return nil, invalidf("S3Payload body of %d bytes exceeds %d", len(body), maxPointerBody)
	}
	var top map[string]json.RawMessage
	if err := decodeOne(body, &top); err != nil {
		return nil, invalidf("not an S3Payload pointer: %s", err)
	}
	raw, ok := top[S3PayloadField]
	if !ok || firstByte(raw) != '{' {
		return nil, invalidf("S3Payload pointer: no %q object", S3PayloadField)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, invalidf("S3Payload pointer: %s", describeJSON(err))
	}
	for _, name := range []string{"Id", "Location"} {
		if v, ok := fields[name]; ok {
			var str string
			if json.Unmarshal(v, &str) != nil {
				return nil, invalidf("S3Payload pointer: field %q has the wrong type", name)
			}
		}
	}
	bucket, err := exactString(fields, "Bucket")
	if err != nil {
		return nil, err
	}
	key, err := exactString(fields, "Key")
	if err != nil {
		return nil, err
	}
	p := &Pointer{Bucket: bucket, Key: key, Size: -1}
	if err := checkLocation(p.Bucket, p.Key); err != nil {
		return nil, err
	}
	_, current := attrs[AttrPayloadSize]
	_, legacy := attrs[AttrLegacyPayloadSize]
	if current || legacy {
		if p.Size, p.Marker, err = markerSize(attrs); err != nil {
			return nil, err
		}
	}
	if err := p.claimcheckAttrs(attrs); err != nil {
		return nil, err
	}
	return p, nil
}

// claimcheckAttrs reads AttrSHA256 and AttrTenant into p, if present.
func (p *Pointer) claimcheckAttrs(attrs map[string]string) error {
	if d, ok := attrs[AttrSHA256]; ok {
		if !claimcheck.IsHexDigest(d) {
			return invalidf("AWS payload pointer: %s is not 64 lowercase hex characters", AttrSHA256)
		}
		p.SHA256 = d
	}
	if t, ok := attrs[AttrTenant]; ok {
		if err := claimcheck.ValidateTenant(t); err != nil {
			return invalidf("AWS payload pointer: %s: %v", AttrTenant, err)
		}
		p.Tenant = t
	}
	return nil
}

// markerSize reads the payload size from whichever marker is present, the
// current name first (as getReservedAttributeNameIfPresent does).
func markerSize(attrs map[string]string) (int64, string, error) {
	var (
		size   int64 = -1
		marker string
	)
	for _, name := range []string{AttrPayloadSize, AttrLegacyPayloadSize} {
		v, ok := attrs[name]
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, "", invalidf("AWS payload pointer: marker %s=%q is not a non-negative integer", name, truncate(v, 40))
		}
		if marker != "" && n != size {
			return 0, "", invalidf("AWS payload pointer: markers %s=%d and %s=%d disagree", marker, size, name, n)
		}
		if marker == "" {
			size, marker = n, name
		}
	}
	if marker == "" {
		return 0, "", invalidf("AWS payload pointer without a size marker (%s or %s)", AttrPayloadSize, AttrLegacyPayloadSize)
	}
	return size, marker, nil
}

func checkLocation(bucket, key string) error {
	switch {
	case !utf8.ValidString(bucket) || len(bucket) > 255:
		return invalidf("AWS payload pointer: invalid s3BucketName")
	case !utf8.ValidString(key):
		return invalidf("AWS payload pointer: s3Key is not valid UTF-8")
	case len(key) > maxS3KeyLen:
		return invalidf("AWS payload pointer: s3Key of %d bytes exceeds S3's %d", len(key), maxS3KeyLen)
	}
	return nil
}

// NewPointer publishes t's payload for an AWS-format consumer: it copies
// the payload to an object only this pointer names
// (claimcheck.Store.CopyForPointer: payloads/<tenant>/pointer/<random hex>,
// server-side where the store can) and returns the pointer to that copy in
// bucket (the bucket behind store, as the consumer names it; its key
// includes the store's namespace), carrying t's size, digest and tenant.
//
// A pointer never names the ticket's own object: that object is
// content-addressed and shared by every check-in of the same bytes
// (docs/invariants.md, invariant 2), and the AWS extended clients delete
// the object a pointer names when they acknowledge its message (the Java,
// Python and Go clients by default), which would take the payload from
// under every other ticket and job holding it. The copy is the message's
// own: deleting it harms nothing else, and the sweeper removes it after its
// pointer retention if no consumer does (sweep.Options.PointerRetention).
// Call NewPointer once per message published.
//
// Errors: those of CopyForPointer (ErrConfig for a sealing store).
func NewPointer(ctx context.Context, store *claimcheck.Store, bucket string, t *claimcheck.Ticket) (*Pointer, error) {
	key, err := store.CopyForPointer(ctx, t)
	if err != nil {
		return nil, fmt.Errorf("broker: AWS payload pointer: %w", err)
	}
	return &Pointer{Bucket: bucket, Key: store.Namespace() + key, Size: t.Size, SHA256: t.SHA256, Tenant: t.Tenant}, nil
}

// Message encodes p in the AWS payload-offloading format, so the Java and
// Python extended clients read it: the body
// ["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":…,"s3Key":…}]
// exactly as Jackson writes it, the attributes extra plus the marker
// (p.Marker: AttrPayloadSize unless AttrLegacyPayloadSize is asked for)
// with data type Number, as the Java and Python clients write it
// (Message.Types), and, when set, AttrSHA256 and AttrTenant. With p.Body
// PointerBodyS3Payload the body is sns-sqs-big-payload's instead:
// {"S3Payload":{"Id":<the key's last element>,"Bucket":…,"Key":…,"Location":"s3://<bucket>/<key>"}}.
//
// ErrTicketInvalid if p is incomplete or malformed; ErrConfig if extra uses
// a name Message writes, p.Marker is neither marker name, p.Body is
// neither body form or is PointerBodyS3Payload with the legacy marker, or
// the message would carry more attributes than SQS allows (10).
func (p *Pointer) Message(extra map[string]string) (Message, error) {
	if p.Bucket == "" || p.Key == "" {
		return Message{}, invalidf("AWS payload pointer needs a bucket and a key")
	}
	if err := checkLocation(p.Bucket, p.Key); err != nil {
		return Message{}, err
	}
	if p.Size < 0 {
		return Message{}, invalidf("AWS payload pointer: negative size")
	}
	if p.SHA256 != "" && !claimcheck.IsHexDigest(p.SHA256) {
		return Message{}, invalidf("AWS payload pointer: sha256 is not 64 lowercase hex characters")
	}
	if p.Tenant != "" {
		if err := claimcheck.ValidateTenant(p.Tenant); err != nil {
			return Message{}, invalidf("AWS payload pointer: tenant: %v", err)
		}
	}
	attrs := make(map[string]string, len(extra)+3)
	for k, v := range extra {
		switch k {
		case AttrPayloadSize, AttrLegacyPayloadSize, AttrSHA256, AttrTenant:
			return Message{}, fmt.Errorf("broker: attribute %s is reserved for the AWS payload pointer: %w", k, claimcheck.ErrConfig)
		}
		attrs[k] = v
	}
	marker := p.Marker
	switch marker {
	case "":
		marker = AttrPayloadSize
	case AttrPayloadSize, AttrLegacyPayloadSize:
	default:
		return Message{}, fmt.Errorf("broker: AWS payload pointer: marker %q is neither %s nor %s: %w", truncate(marker, 40), AttrPayloadSize, AttrLegacyPayloadSize, claimcheck.ErrConfig)
	}
	attrs[marker] = strconv.FormatInt(p.Size, 10)
	if p.SHA256 != "" {
		attrs[AttrSHA256] = p.SHA256
	}
	if p.Tenant != "" {
		attrs[AttrTenant] = p.Tenant
	}
	if len(attrs) > maxAWSAttributes {
		return Message{}, fmt.Errorf("broker: AWS payload pointer message would carry %d attributes, more than SQS's %d: %w", len(attrs), maxAWSAttributes, claimcheck.ErrConfig)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// Jackson does not escape <, > and &; neither do we, so the bytes match.
	enc.SetEscapeHTML(false)
	b, k := p.Bucket, p.Key
	var body any
	switch p.Body {
	case "", PointerBodyAWS:
		body = []any{PointerClass, pointerFields{Bucket: &b, Key: &k}}
	case PointerBodyS3Payload:
		if marker == AttrLegacyPayloadSize {
			// sns-sqs-big-payload's compatibility mode reads a body with
			// the legacy marker as the AWS array, and would fail on this.
			return Message{}, fmt.Errorf("broker: AWS payload pointer: the %s body goes with the %s marker, not %s: %w", PointerBodyS3Payload, AttrPayloadSize, AttrLegacyPayloadSize, claimcheck.ErrConfig)
		}
		id, loc := path.Base(k), "s3://"+b+"/"+k
		body = map[string]s3PayloadFields{S3PayloadField: {ID: &id, Bucket: &b, Key: &k, Location: &loc}}
	default:
		return Message{}, fmt.Errorf("broker: AWS payload pointer: body %q is neither %s nor %s: %w", truncate(p.Body, 20), PointerBodyAWS, PointerBodyS3Payload, claimcheck.ErrConfig)
	}
	if err := enc.Encode(body); err != nil {
		return Message{}, fmt.Errorf("broker: encode AWS payload pointer: %w", err)
	}
	return Message{Body: bytes.TrimSuffix(buf.Bytes(), []byte("\n")), Attributes: attrs, Types: map[string]string{marker: AttrNumber}}, nil
}

// SNS message types (Amazon SNS Developer Guide, HTTP/HTTPS JSON formats).
var snsTypes = map[string]bool{"Notification": true, "SubscriptionConfirmation": true, "UnsubscribeConfirmation": true}

// UnwrapSNS unwraps an SNS notification envelope (a subscription without
// raw message delivery): a JSON object with "Type":"Notification" and
// "Message", the published message as a string. It returns the inner
// message: its body is the Message string, its attributes those of attrs
// (the carrying queue's own, usually none) merged with the envelope's
// MessageAttributes (each {"Type":…,"Value":…}; the Value string is taken
// as is, so a Binary attribute stays base64, and a Type other than String
// is kept in the message's Types).
//
// ok is false, with no error, when body is not an SNS envelope: not a JSON
// object, or one without an SNS "Type". A body that is an SNS envelope but
// unusable (another SNS message type, "Message" missing or not a string, a
// malformed attribute, an envelope attribute contradicting attrs) returns
// ok true and an error wrapping claimcheck.ErrTicketInvalid.
//
// The envelope's Signature is not verified: the queue's access policy is
// the trust boundary, and a claimcheck ticket carries its own signature.
func UnwrapSNS(body []byte, attrs map[string]string) (Message, bool, error) {
	if firstByte(body) != '{' {
		return Message{}, false, nil
	}
	// Names are matched exactly (SNS writes them so; Go's encoding/json
	// would also accept other cases).
	var env map[string]json.RawMessage
	if decodeOne(body, &env) != nil {
		return Message{}, false, nil
	}
	var typ string
	if json.Unmarshal(env["Type"], &typ) != nil || !snsTypes[typ] {
		return Message{}, false, nil
	}
	if typ != "Notification" {
		return Message{}, true, invalidf("SNS %s message, not a notification", typ)
	}
	raw, ok := env["Message"]
	if !ok {
		return Message{}, true, invalidf("SNS notification without a Message string")
	}
	var msg string
	if err := json.Unmarshal(raw, &msg); err != nil {
		return Message{}, true, invalidf("malformed SNS notification: Message is not a string")
	}
	var envAttrs map[string]json.RawMessage
	if ma, ok := env["MessageAttributes"]; ok {
		if err := json.Unmarshal(ma, &envAttrs); err != nil {
			return Message{}, true, invalidf("malformed SNS notification: MessageAttributes is not an object")
		}
	}
	out := make(map[string]string, len(attrs)+len(envAttrs))
	for k, v := range attrs {
		out[k] = v
	}
	var types map[string]string // the envelope's non-String types
	for name, raw := range envAttrs {
		var fields map[string]json.RawMessage
		var t, v string
		if json.Unmarshal(raw, &fields) != nil ||
			json.Unmarshal(fields["Type"], &t) != nil || t == "" ||
			json.Unmarshal(fields["Value"], &v) != nil {
			return Message{}, true, invalidf("malformed SNS notification: message attribute %q lacks a Type or Value string", truncate(name, 80))
		}
		if old, ok := out[name]; ok && old != v {
			return Message{}, true, invalidf("SNS notification: attribute %q differs between the envelope and the queue message", truncate(name, 80))
		}
		out[name] = v
		if t != attributeType {
			if types == nil {
				types = map[string]string{}
			}
			types[name] = t
		}
	}
	return Message{Body: []byte(msg), Attributes: out, Types: types}, true, nil
}

// BodyKind is what DecodeBody found in a message.
type BodyKind string

const (
	// KindTicket is a claimcheck ticket (a JSON object with "v").
	KindTicket BodyKind = "ticket"
	// KindPointer is an AWS payload-offloading pointer.
	KindPointer BodyKind = "aws-pointer"
	// KindRaw is a body in none of the formats, taken as the payload
	// itself (ConsumeOptions.RawTenant). DecodeBody never returns it.
	KindRaw BodyKind = "raw"
)

// Decoded is a classified message.
type Decoded struct {
	Kind BodyKind
	// Message is the message the ticket or pointer was read from: the
	// input, or the notification inside its SNS envelope.
	Message Message
	// SNS reports whether an SNS envelope was unwrapped.
	SNS bool
	// Ticket is set when Kind is KindTicket.
	Ticket *claimcheck.Ticket
	// Pointer is set when Kind is KindPointer.
	Pointer *Pointer
}

// DecodeBody classifies a received message. It unwraps an SNS notification
// envelope once (UnwrapSNS), then recognises:
//   - a claimcheck ticket: a JSON object with a "v" field, parsed and
//     validated by claimcheck.ParseTicket; its AttrTenant attribute, if any,
//     must match the ticket's tenant;
//   - an AWS payload-offloading pointer: a JSON array, parsed by
//     ParsePointer (marker attribute required);
//   - the npm package sns-sqs-big-payload's default pointer: a JSON object
//     with an "S3Payload" field (and no "v"), parsed by ParseS3Payload
//     (no marker: its size is not known).
//
// Anything else — an empty or non-JSON body, a JSON object that is neither,
// an SNS envelope inside an SNS envelope, a malformed envelope, ticket or
// pointer — is an error wrapping claimcheck.ErrTicketInvalid, so a consumer
// dead-letters it at once and never hands it to a handler as payload
// (unless it accepts raw payloads, ConsumeOptions.RawTenant, and the body
// is Unrecognised: in none of the formats, rather than a malformed one). Error
// strings never contain body bytes or object keys.
//
// DecodeBody is a pure function: it reads no store and settles nothing.
func DecodeBody(m Message) (*Decoded, error) {
	d := &Decoded{Message: m}
	inner, ok, err := UnwrapSNS(m.Body, m.Attributes)
	if err != nil {
		return nil, err
	}
	if ok {
		d.Message, d.SNS = inner, true
	}
	body, attrs := d.Message.Body, d.Message.Attributes
	where := "message"
	if d.SNS {
		where = "SNS notification"
	}
	switch firstByte(body) {
	case '{':
		if len(body) > claimcheck.MaxEncodedTicketBytes {
			return nil, unrecognisedf("%s body of %d bytes is larger than any ticket or pointer", where, len(body))
		}
		var probe map[string]json.RawMessage
		if err := decodeOne(body, &probe); err != nil {
			return nil, unrecognisedf("unrecognised %s body: a JSON object that does not decode (%s)", where, err)
		}
		if _, ok := probe["v"]; ok {
			t, err := claimcheck.ParseTicket(body)
			if err != nil {
				return nil, fmt.Errorf("broker: %s: %w", where, err)
			}
			if tenant, ok := attrs[AttrTenant]; ok && tenant != t.Tenant {
				return nil, invalidf("%s tenant %q does not match ticket %s", where, tenant, t)
			}
			d.Kind, d.Ticket = KindTicket, t
			return d, nil
		}
		if _, ok := probe[S3PayloadField]; ok {
			p, err := ParseS3Payload(body, attrs)
			if err != nil {
				return nil, fmt.Errorf("broker: %s: %w", where, err)
			}
			d.Kind, d.Pointer = KindPointer, p
			return d, nil
		}
		if d.SNS {
			if _, nested := probe["Type"]; nested {
				if _, nestedOK, _ := UnwrapSNS(body, nil); nestedOK {
					return nil, invalidf("SNS envelope inside an SNS envelope")
				}
			}
		}
		return nil, unrecognisedf("unrecognised %s body: a JSON object that is neither a claimcheck ticket (no \"v\"), an S3Payload pointer nor an SNS notification", where)
	case '[':
		p, err := ParsePointer(body, attrs)
		if err != nil {
			if !pointerClassFirst(body) {
				return nil, &unrecognisedError{fmt.Errorf("broker: unrecognised %s body: %w", where, err)}
			}
			return nil, fmt.Errorf("broker: %s: %w", where, err)
		}
		d.Kind, d.Pointer = KindPointer, p
		return d, nil
	case 0:
		return nil, invalidf("empty %s body", where)
	default:
		return nil, unrecognisedf("unrecognised %s body: neither a claimcheck ticket, an AWS payload pointer nor an SNS notification", where)
	}
}

// pointerClassFirst reports whether body is a JSON array whose first
// element is one of the pointer class names: an AWS payload pointer,
// however malformed the rest, never a raw payload.
func pointerClassFirst(body []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return false
	}
	t, err := dec.Token()
	return err == nil && (t == PointerClass || t == LegacyPointerClass)
}

// RawMessage is m as a raw payload message: the notification inside m's
// SNS envelope if it is one (UnwrapSNS), else m. A malformed envelope is
// taken as it is.
func RawMessage(m Message) Message {
	if inner, ok, err := UnwrapSNS(m.Body, m.Attributes); ok && err == nil {
		return inner
	}
	return m
}

// firstByte is the first non-whitespace byte of b (JSON whitespace), 0 if
// none.
func firstByte(b []byte) byte {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c
	}
	return 0
}

// decodeOne decodes exactly one JSON value from b into v: trailing data is
// an error. The error describes position and type, never content.
func decodeOne(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(v); err != nil {
		return errors.New(describeJSON(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// describeJSON keeps a JSON error's position and type, never the bytes.
func describeJSON(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("malformed JSON: syntax error at byte %d", se.Offset)
	case errors.As(err, &te):
		if te.Field == "" {
			return fmt.Sprintf("JSON %s where %s was expected", te.Value, te.Type)
		}
		return fmt.Sprintf("field %q has the wrong type", te.Field)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "malformed JSON: truncated"
	default:
		return "malformed JSON"
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// pointerTicket turns a received AWS payload pointer into the ticket
// Consume works: a claimcheck-written pointer (with AttrSHA256 and
// AttrTenant) names a claimcheck object and is claimed and verified like
// its ticket; a foreign one is adopted (claimcheck.Store.Adopt) when
// AdoptTenant allows it, and refused otherwise.
// adoptedKey is the key, within store's namespace, of the foreign object
// p names when pointerTicket adopts it (a pointer without claimcheck's
// digest, on this consumer's bucket and namespace, with AdoptTenant set);
// "" for any other pointer.
func (opts *ConsumeOptions) adoptedKey(store *claimcheck.Store, p *Pointer) string {
	if opts.AdoptTenant == "" || p.Verifiable() || opts.PointerBucket == "" || p.Bucket != opts.PointerBucket {
		return ""
	}
	key, ok := strings.CutPrefix(p.Key, store.Namespace())
	if !ok {
		return ""
	}
	return key
}

func (opts *ConsumeOptions) pointerTicket(ctx context.Context, store *claimcheck.Store, p *Pointer) (*claimcheck.Ticket, error) {
	switch {
	case opts.PointerBucket == "":
		return nil, invalidf("AWS payload pointer (%s) received, but this consumer accepts none (no pointer bucket configured)", p)
	case p.Bucket != opts.PointerBucket:
		return nil, invalidf("AWS payload pointer (%s) names another bucket than this consumer's %q", p, opts.PointerBucket)
	}
	key, ok := strings.CutPrefix(p.Key, store.Namespace())
	if !ok {
		return nil, invalidf("AWS payload pointer (%s) names an object outside this store's namespace %q", p, store.Namespace())
	}
	if p.Verifiable() {
		if p.Tenant == "" {
			return nil, invalidf("AWS payload pointer (%s) has a digest but no %s attribute", p, AttrTenant)
		}
		t := &claimcheck.Ticket{Version: claimcheck.TicketVersion, Tenant: p.Tenant, Store: store.Name(),
			Key: key, SHA256: p.SHA256, Size: p.Size, Created: time.Now().UTC()}
		b, err := t.Marshal()
		if err != nil {
			return nil, fmt.Errorf("broker: AWS payload pointer (%s): %w", p, err)
		}
		return claimcheck.ParseTicket(b)
	}
	if opts.AdoptTenant == "" {
		return nil, invalidf("AWS payload pointer (%s) carries no digest, so its payload cannot be verified; this consumer adopts no foreign pointers", p)
	}
	t, err := store.Adopt(ctx, opts.AdoptTenant, key, p.Size, nil)
	if err != nil {
		return nil, fmt.Errorf("broker: adopt AWS payload pointer (%s): %w", p, err)
	}
	return t, nil
}
