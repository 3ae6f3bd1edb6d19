package broker

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
)

// Pointer bodies exactly as the AWS libraries build them.
const (
	// Java: PayloadS3Pointer.toJson() through JsonDataConverter, whose
	// ObjectMapper has `objectMapper.enableDefaultTyping(DefaultTyping.NON_FINAL);`
	// (payload-offloading-java-common-lib-for-aws): a wrapper array, no
	// spaces, fields in declaration order. As built in
	// AmazonSQSExtendedClientSnsTest:
	// `String s3Pointer = new PayloadS3Pointer(S3_BUCKET_NAME, "s3-key").toJson();`
	javaBody = `["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"test-bucket","s3Key":"s3-key"}]`
	// Python (amazon-sqs-python-extended-client-lib, client.py):
	// `message_body = dumps([message_pointer, {"s3BucketName": self.large_payload_support, "s3Key": s3_key}])`
	// with json.dumps' default separators ", " and ": ".
	pythonBody = `["software.amazon.payloadoffloading.PayloadS3Pointer", {"s3BucketName": "my-bucket", "s3Key": "0b0e8b52-6a8e-4bde-9f1b-1f6c9c1f5e21"}]`
	// Python with use_legacy_attribute: `LEGACY_MESSAGE_POINTER_CLASS if self.use_legacy_attribute else MESSAGE_POINTER_CLASS`
	pythonLegacyBody = `["com.amazon.sqs.javamessaging.MessageS3Pointer", {"s3BucketName": "my-bucket", "s3Key": "0b0e8b52-6a8e-4bde-9f1b-1f6c9c1f5e21"}]`
)

var testDigest = strings.Repeat("ab", 32)

func offloadedTicket(t *testing.T) *claimcheck.Ticket {
	t.Helper()
	tk := &claimcheck.Ticket{Version: 1, Tenant: "acme", Store: "default", Key: "payloads/acme/" + testDigest,
		SHA256: testDigest, Size: 4707275, ContentType: "application/pdf",
		Created: time.Date(2026, 11, 29, 21, 34, 24, 0, time.UTC)}
	if _, err := tk.Marshal(); err != nil {
		t.Fatalf("test ticket invalid: %v", err)
	}
	return tk
}

// snsWrap builds a non-raw SNS delivery as documented in the Amazon SNS
// Developer Guide ("HTTP/HTTPS notification JSON format", "Amazon SNS raw
// message delivery"): Message is the published string, MessageAttributes
// {"name":{"Type":…,"Value":…}}.
func snsWrap(t *testing.T, message string, attrs map[string][2]string) []byte {
	t.Helper()
	env := map[string]any{
		"Type":             "Notification",
		"MessageId":        "dc1e94d9-56c5-5e96-808d-cc7f68faa162",
		"TopicArn":         "arn:aws:sns:us-east-2:111122223333:ExampleTopic1",
		"Subject":          "TestSubject",
		"Message":          message,
		"Timestamp":        "2021-02-16T21:41:19.978Z",
		"SignatureVersion": "1",
		"Signature":        "FMG5tlZhJNHLHUXvZgtZzlk24FzVa7oX0T4P03neeXw8ZEXZx6z35j2FOTuNYShn2h0bKNC/zLTnMyIxEzmi2X1shOBWsJHkrW2xkR58ABZF+4uWHEE73yDVR4SyYAikP9jstZzDRm+bcVs8+T0yaLiEGLrIIIL4esi1llhIkgErCuy5btPcWXBdio2fpCRD5x9oR6gmE/rd5O7lX1c1uvnv4r1Lkk4pqP2/iUfxFZva1xLSRvgyfm6D9hNklVyPfy+7TalMD0lzmJuOrExtnSIbZew3foxgx8GT+lbZkLd0ZdtdRJlIyPRP44eyq78sU0Eo/LsDr0Iak4ZDpg8dXg==",
		"SigningCertURL":   "https://sns.us-east-2.amazonaws.com/SimpleNotificationService-010a507c1833636cd94bdb98bd93083a.pem",
		"UnsubscribeURL":   "https://sns.us-east-2.amazonaws.com/?Action=Unsubscribe&SubscriptionArn=arn:aws:sns:us-east-2:111122223333:ExampleTopic1:e1039402-24e7-40a3-a0d4-797da162b297",
	}
	if attrs != nil {
		ma := map[string]any{}
		for k, tv := range attrs {
			ma[k] = map[string]string{"Type": tv[0], "Value": tv[1]}
		}
		env["MessageAttributes"] = ma
	}
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParsePointerAWSBodies(t *testing.T) {
	for _, c := range []struct {
		name   string
		body   string
		attrs  map[string]string
		bucket string
		key    string
		size   int64
		marker string
	}{
		// Java: updateMessageAttributePayloadSize puts
		// `messageAttributeValueBuilder.stringValue(messageContentSize.toString())`
		// under SQSExtendedClientConstants.RESERVED_ATTRIBUTE_NAME ("ExtendedPayloadSize").
		{"java current marker", javaBody, map[string]string{"ExtendedPayloadSize": "100"}, "test-bucket", "s3-key", 100, AttrPayloadSize},
		// Java with usesLegacyReservedAttributeName:
		// `updatedMessageAttributes.put(LEGACY_RESERVED_ATTRIBUTE_NAME, messageAttributeValue);`
		{"java legacy marker", javaBody, map[string]string{"SQSLargePayloadSize": "300000"}, "test-bucket", "s3-key", 300000, AttrLegacyPayloadSize},
		// Python: `attribute_value = {"DataType": "Number", "StringValue": str(len(encoded_body))}`
		{"python current marker", pythonBody, map[string]string{"ExtendedPayloadSize": "262145", "user": "x"}, "my-bucket", "0b0e8b52-6a8e-4bde-9f1b-1f6c9c1f5e21", 262145, AttrPayloadSize},
		{"python legacy class and marker", pythonLegacyBody, map[string]string{"SQSLargePayloadSize": "262145"}, "my-bucket", "0b0e8b52-6a8e-4bde-9f1b-1f6c9c1f5e21", 262145, AttrLegacyPayloadSize},
		{"both markers agreeing", javaBody, map[string]string{"ExtendedPayloadSize": "7", "SQSLargePayloadSize": "7"}, "test-bucket", "s3-key", 7, AttrPayloadSize},
		{"unknown fields ignored as Jackson does", `["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"b","s3Key":"k","extra":1}]`, map[string]string{"ExtendedPayloadSize": "0"}, "b", "k", 0, AttrPayloadSize},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := ParsePointer([]byte(c.body), c.attrs)
			if err != nil {
				t.Fatal(err)
			}
			if p.Bucket != c.bucket || p.Key != c.key || p.Size != c.size || p.Marker != c.marker {
				t.Fatalf("got %+v", p)
			}
			if p.Verifiable() || p.SHA256 != "" || p.Tenant != "" {
				t.Fatalf("foreign pointer claims a digest or tenant: %+v", p)
			}
			d, err := DecodeBody(Message{Body: []byte(c.body), Attributes: c.attrs})
			if err != nil || d.Kind != KindPointer || d.SNS || d.Pointer.Key != c.key {
				t.Fatalf("DecodeBody = %+v, %v", d, err)
			}
		})
	}
}

func TestDecodeBodySNS(t *testing.T) {
	tk := offloadedTicket(t)
	ticketJSON, err := tk.Marshal()
	if err != nil {
		t.Fatal(err)
	}

	t.Run("ticket", func(t *testing.T) {
		body := snsWrap(t, string(ticketJSON), map[string][2]string{AttrKind: {"String", "pdf"}, AttrTenant: {"String", "acme"}})
		d, err := DecodeBody(Message{Body: body})
		if err != nil {
			t.Fatal(err)
		}
		if d.Kind != KindTicket || !d.SNS || d.Ticket.SHA256 != tk.SHA256 || d.Ticket.Key != tk.Key {
			t.Fatalf("got %+v", d)
		}
		if d.Message.Attributes[AttrKind] != "pdf" || d.Message.Attributes[AttrTenant] != "acme" || string(d.Message.Body) != string(ticketJSON) {
			t.Fatalf("inner message %q %v", d.Message.Body, d.Message.Attributes)
		}
	})

	t.Run("pointer, marker in the envelope", func(t *testing.T) {
		// SNS extended client publishes the pointer with the marker as an SNS
		// message attribute; without raw delivery it lands in MessageAttributes.
		body := snsWrap(t, javaBody, map[string][2]string{"ExtendedPayloadSize": {"Number", "100"}})
		d, err := DecodeBody(Message{Body: body})
		if err != nil {
			t.Fatal(err)
		}
		if d.Kind != KindPointer || !d.SNS || d.Pointer.Bucket != "test-bucket" || d.Pointer.Key != "s3-key" || d.Pointer.Size != 100 {
			t.Fatalf("got %+v", d)
		}
	})

	t.Run("pointer, marker on the SQS message (AmazonSQSExtendedClientSnsTest)", func(t *testing.T) {
		// `String snsJson = "{\"Type\":\"Notification\",\"Subject\":\"LargePayload\",\"Message\":\"" + escapedS3Pointer + "\"}";`
		// with `.messageAttributes(Collections.singletonMap(SQSExtendedClientConstants.RESERVED_ATTRIBUTE_NAME, ... stringValue("100")`
		escaped := strings.ReplaceAll(javaBody, `"`, `\"`)
		body := `{"Type":"Notification","Subject":"LargePayload","Message":"` + escaped + `"}`
		d, err := DecodeBody(Message{Body: []byte(body), Attributes: map[string]string{"ExtendedPayloadSize": "100"}})
		if err != nil {
			t.Fatal(err)
		}
		if d.Kind != KindPointer || !d.SNS || d.Pointer.Size != 100 || d.Pointer.Key != "s3-key" {
			t.Fatalf("got %+v", d)
		}
	})

	t.Run("legacy marker", func(t *testing.T) {
		body := snsWrap(t, pythonLegacyBody, map[string][2]string{"SQSLargePayloadSize": {"Number", "5"}})
		d, err := DecodeBody(Message{Body: body})
		if err != nil || d.Pointer.Marker != AttrLegacyPayloadSize || d.Pointer.Size != 5 {
			t.Fatalf("got %+v, %v", d, err)
		}
	})
}

func TestUnwrapSNSNotAnEnvelope(t *testing.T) {
	tk := offloadedTicket(t)
	ticketJSON, _ := tk.Marshal()
	for _, body := range []string{string(ticketJSON), javaBody, "hello", "", `{"Type":"Other","Message":"x"}`, `{"Type":1}`, `{"a":`} {
		m, ok, err := UnwrapSNS([]byte(body), nil)
		if ok || err != nil || m.Body != nil {
			t.Errorf("UnwrapSNS(%.30q) = %v, %v, %v; want not an envelope", body, m, ok, err)
		}
	}
}

func TestDecodeBodyRejects(t *testing.T) {
	tk := offloadedTicket(t)
	ticketJSON, _ := tk.Marshal()
	const secretKey = "secret-object-key"
	secretBody := `["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"b","s3Key":"` + secretKey + `"}]`
	marker := map[string]string{"ExtendedPayloadSize": "10"}
	for _, c := range []struct {
		name  string
		body  string
		attrs map[string]string
		want  string // in the error
	}{
		{"empty body", "", nil, "empty message body"},
		{"whitespace body", " \n", nil, "empty message body"},
		{"plain text", "hello world", nil, "unrecognised message body"},
		{"JSON number", "123", nil, "unrecognised"},
		{"JSON string", `"x"`, nil, "unrecognised"},
		{"JSON null", "null", nil, "unrecognised"},
		{"object neither ticket nor SNS", `{"foo":1}`, nil, `no "v"`},
		{"truncated object", `{"v":1,`, nil, "truncated"},
		{"ticket of another major version", `{"v":2,"tenant":"acme"}`, nil, "unsupported major version"},
		{"ticket with trailing data", string(ticketJSON) + "{}", nil, "trailing data"},
		{"ticket tenant mismatch", string(ticketJSON), map[string]string{AttrTenant: "other"}, "does not match"},
		{"pointer without marker", javaBody, nil, "without a size marker"},
		{"pointer with non-numeric marker", javaBody, map[string]string{"ExtendedPayloadSize": "abc"}, "not a non-negative integer"},
		{"pointer with negative marker", javaBody, map[string]string{"SQSLargePayloadSize": "-1"}, "not a non-negative integer"},
		{"pointer with disagreeing markers", javaBody, map[string]string{"ExtendedPayloadSize": "1", "SQSLargePayloadSize": "2"}, "disagree"},
		{"pointer with unknown class", `["com.example.Evil",{"s3BucketName":"b","s3Key":"k"}]`, marker, "unknown class"},
		{"pointer of one element", `["software.amazon.payloadoffloading.PayloadS3Pointer"]`, marker, "1 elements"},
		{"empty array", `[]`, marker, "0 elements"},
		{"pointer second element not an object", `["software.amazon.payloadoffloading.PayloadS3Pointer",["b","k"]]`, marker, "not an object"},
		{"pointer without key", `["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"b"}]`, marker, "no s3Key"},
		{"pointer with empty bucket", `["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"","s3Key":"k"}]`, marker, "no s3BucketName"},
		{"pointer bucket of wrong type", `["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":5,"s3Key":"k"}]`, marker, "wrong type"},
		{"pointer with trailing data", javaBody + "]", marker, "trailing data"},
		{"pointer with key too long", `["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"b","s3Key":"` + strings.Repeat("k", 1025) + `"}]`, marker, "exceeds S3's 1024"},
		{"pointer with bad digest attribute", secretBody, map[string]string{"ExtendedPayloadSize": "1", AttrSHA256: "XYZ"}, "not 64 lowercase hex"},
		{"pointer with bad tenant attribute", secretBody, map[string]string{"ExtendedPayloadSize": "1", AttrTenant: "no/slash"}, AttrTenant},
		{"pointer field names in another case", `["software.amazon.payloadoffloading.PayloadS3Pointer",{"S3BucketName":"b","S3Key":"k"}]`, marker, "no s3BucketName"},
		{"SNS-like object in another case", `{"type":"Notification","message":"x"}`, nil, `no "v"`},
		{"SNS notification without Message", `{"Type":"Notification","MessageId":"x"}`, nil, "without a Message"},
		{"SNS Message not a string", `{"Type":"Notification","Message":{"v":1}}`, nil, "Message is not a string"},
		{"SNS subscription confirmation", `{"Type":"SubscriptionConfirmation","Message":"You have chosen to subscribe","SubscribeURL":"https://example"}`, nil, "not a notification"},
		{"SNS attribute without Value", `{"Type":"Notification","Message":"x","MessageAttributes":{"a":{"Type":"String"}}}`, nil, "lacks a Type or Value"},
		{"SNS attributes not an object", `{"Type":"Notification","Message":"x","MessageAttributes":[1]}`, nil, "MessageAttributes is not an object"},
		{"SNS attribute contradicting the queue's", `{"Type":"Notification","Message":"x","MessageAttributes":{"claimcheck-tenant":{"Type":"String","Value":"a"}}}`, map[string]string{AttrTenant: "b"}, "differs"},
		{"SNS wrapping plain text", `{"Type":"Notification","Message":"hello"}`, nil, "unrecognised SNS notification body"},
		{"SNS wrapping an empty message", `{"Type":"Notification","Message":""}`, nil, "empty SNS notification body"},
		{"SNS wrapping SNS", `{"Type":"Notification","Message":"{\"Type\":\"Notification\",\"Message\":\"x\"}"}`, nil, "inside an SNS envelope"},
		{"SNS wrapping an unknown object", `{"Type":"Notification","Message":"{\"foo\":1}"}`, nil, `no "v"`},
		{"SNS wrapping a pointer without marker", `{"Type":"Notification","Message":"` + strings.ReplaceAll(javaBody, `"`, `\"`) + `"}`, nil, "without a size marker"},
		{"SNS wrapping a bad ticket", `{"Type":"Notification","Message":"{\"v\":1}"}`, nil, "SNS notification"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := DecodeBody(Message{Body: []byte(c.body), Attributes: c.attrs})
			if err == nil {
				t.Fatalf("accepted: %+v", d)
			}
			if d != nil {
				t.Fatalf("returned a result with the error: %+v", d)
			}
			if !errors.Is(err, claimcheck.ErrTicketInvalid) {
				t.Fatalf("error does not wrap ErrTicketInvalid: %v", err)
			}
			if claimcheck.Reason(err) != claimcheck.Reason(claimcheck.ErrTicketInvalid) {
				t.Fatalf("reason %q", claimcheck.Reason(err))
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not say %q", err, c.want)
			}
			if strings.Contains(err.Error(), secretKey) {
				t.Fatalf("error leaks the object key: %v", err)
			}
		})
	}
}

// pointerTo is the pointer NewPointer makes, but to the ticket's own key
// (these tests look at the format only; NewPointer's copy is tested in
// consume_interop_test.go).
func pointerTo(bucket string, tk *claimcheck.Ticket) *Pointer {
	return &Pointer{Bucket: bucket, Key: tk.Key, Size: tk.Size, SHA256: tk.SHA256, Tenant: tk.Tenant}
}

func TestPointerRoundTrip(t *testing.T) {
	tk := offloadedTicket(t)
	p := pointerTo("claimcheck-payloads", tk)
	m, err := p.Message(map[string]string{AttrKind: "pdf"})
	if err != nil {
		t.Fatal(err)
	}
	// Byte for byte what Jackson writes for new PayloadS3Pointer(bucket, key).toJson().
	wantBody := `["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"claimcheck-payloads","s3Key":"payloads/acme/` + testDigest + `"}]`
	if string(m.Body) != wantBody {
		t.Fatalf("body\n got %s\nwant %s", m.Body, wantBody)
	}
	wantAttrs := map[string]string{
		"ExtendedPayloadSize": "4707275",
		"claimcheck-sha256":   testDigest,
		"claimcheck-tenant":   "acme",
		"claimcheck-kind":     "pdf",
	}
	if len(m.Attributes) != len(wantAttrs) {
		t.Fatalf("attributes %v", m.Attributes)
	}
	for k, v := range wantAttrs {
		if m.Attributes[k] != v {
			t.Fatalf("attribute %s = %q, want %q (all: %v)", k, m.Attributes[k], v, m.Attributes)
		}
	}
	// The shape the Python reader checks: `isinstance(message_body, list) and
	// len(message_body) == 2 and isinstance(message_body[1], dict)`, then
	// `message_body[1]['s3BucketName'], message_body[1]['s3Key']`.
	var generic []any
	if err := json.Unmarshal(m.Body, &generic); err != nil || len(generic) != 2 {
		t.Fatalf("not a two-element array: %v %v", generic, err)
	}
	obj, ok := generic[1].(map[string]any)
	if !ok || generic[0] != PointerClass || len(obj) != 2 || obj["s3BucketName"] != "claimcheck-payloads" || obj["s3Key"] != tk.Key {
		t.Fatalf("shape %#v", generic)
	}

	back, err := ParsePointer(m.Body, m.Attributes)
	if err != nil {
		t.Fatal(err)
	}
	want := Pointer{Bucket: "claimcheck-payloads", Key: tk.Key, Size: tk.Size, SHA256: tk.SHA256, Tenant: "acme", Marker: AttrPayloadSize}
	if *back != want || !back.Verifiable() {
		t.Fatalf("parsed %+v, want %+v", *back, want)
	}
	d, err := DecodeBody(m)
	if err != nil || d.Kind != KindPointer || *d.Pointer != want {
		t.Fatalf("DecodeBody = %+v, %v", d, err)
	}
	// Through SNS as well, attributes travelling in the envelope.
	env := map[string][2]string{}
	for k, v := range m.Attributes {
		env[k] = [2]string{"String", v}
	}
	d, err = DecodeBody(Message{Body: snsWrap(t, string(m.Body), env)})
	if err != nil || d.Kind != KindPointer || !d.SNS || *d.Pointer != want {
		t.Fatalf("DecodeBody via SNS = %+v, %v", d, err)
	}
	if s := back.String(); strings.Contains(s, tk.Key) {
		t.Fatalf("String leaks the key: %s", s)
	}
}

func TestPointerMessageNoHTMLEscaping(t *testing.T) {
	p := &Pointer{Bucket: "b", Key: "a<b>&c/é", Size: 3}
	m, err := p.Message(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"b","s3Key":"a<b>&c/é"}]`
	if string(m.Body) != want {
		t.Fatalf("body %s, want %s", m.Body, want)
	}
	if len(m.Attributes) != 1 || m.Attributes[AttrPayloadSize] != "3" {
		t.Fatalf("a foreign-style pointer gets only the marker: %v", m.Attributes)
	}
	back, err := ParsePointer(m.Body, m.Attributes)
	if err != nil || back.Key != p.Key || back.Verifiable() {
		t.Fatalf("%+v %v", back, err)
	}
}

func TestPointerMessageRefuses(t *testing.T) {
	tk := offloadedTicket(t)
	p := pointerTo("b", tk)
	for _, name := range []string{AttrPayloadSize, AttrLegacyPayloadSize, AttrSHA256, AttrTenant} {
		if _, err := p.Message(map[string]string{name: "1"}); !errors.Is(err, claimcheck.ErrConfig) {
			t.Errorf("reserved %s: %v", name, err)
		}
	}
	many := map[string]string{}
	for i := range 8 {
		many[string(rune('a'+i))] = "x"
	}
	if _, err := p.Message(many); !errors.Is(err, claimcheck.ErrConfig) {
		t.Fatalf("11 attributes: %v", err)
	}
	delete(many, "a")
	if _, err := p.Message(many); err != nil {
		t.Fatalf("10 attributes: %v", err)
	}
	for _, bad := range []Pointer{
		{Bucket: "", Key: "k"},
		{Bucket: "b", Key: ""},
		{Bucket: "b", Key: "k", Size: -1},
		{Bucket: "b", Key: "k", SHA256: "ABC"},
		{Bucket: "b", Key: strings.Repeat("k", 1025)},
	} {
		if _, err := bad.Message(nil); !errors.Is(err, claimcheck.ErrTicketInvalid) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}

// The npm package sns-sqs-big-payload 0.1.4's default pointer body, as
// dist/util.js buildS3Payload writes it: JSON.stringify({S3Payload: meta})
// with meta {Id, Bucket, Key, Location} from sendJSON (Key is Id + ".json"
// outside its extendedLibraryCompatibility mode).
const npmBody = `{"S3Payload":{"Id":"5f0c4b7e-2f6a-4a53-9d55-0d8d2f1b8f3e","Bucket":"my-bucket","Key":"5f0c4b7e-2f6a-4a53-9d55-0d8d2f1b8f3e.json","Location":"http://127.0.0.1:8333/my-bucket/5f0c4b7e-2f6a-4a53-9d55-0d8d2f1b8f3e.json"}}`

func TestDecodeBodyS3Payload(t *testing.T) {
	d, err := DecodeBody(Message{Body: []byte(npmBody)})
	if err != nil {
		t.Fatal(err)
	}
	p := d.Pointer
	if d.Kind != KindPointer || p.Bucket != "my-bucket" || p.Key != "5f0c4b7e-2f6a-4a53-9d55-0d8d2f1b8f3e.json" || p.Size != -1 || p.Marker != "" || p.Verifiable() {
		t.Fatalf("%s %+v", d.Kind, p)
	}
	// A marker, if some producer adds one, gives the size.
	d, err = DecodeBody(Message{Body: []byte(npmBody), Attributes: map[string]string{AttrLegacyPayloadSize: "300"}})
	if err != nil || d.Pointer.Size != 300 || d.Pointer.Marker != AttrLegacyPayloadSize {
		t.Fatalf("%+v %v", d, err)
	}
	for name, body := range map[string]string{
		"NoKey":         `{"S3Payload":{"Bucket":"b"}}`,
		"EmptyBucket":   `{"S3Payload":{"Bucket":"","Key":"k"}}`,
		"KeyNotString":  `{"S3Payload":{"Bucket":"b","Key":7}}`,
		"IdNotString":   `{"S3Payload":{"Id":1,"Bucket":"b","Key":"k"}}`,
		"NotAnObject":   `{"S3Payload":"b/k"}`,
		"Null":          `{"S3Payload":null}`,
		"LowercaseName": `{"S3Payload":{"bucket":"b","key":"k"}}`,
		"Trailing":      `{"S3Payload":{"Bucket":"b","Key":"k"}} {}`,
		"LongKey":       `{"S3Payload":{"Bucket":"b","Key":"` + strings.Repeat("k", 1025) + `"}}`,
	} {
		if _, err := DecodeBody(Message{Body: []byte(body)}); !errors.Is(err, claimcheck.ErrTicketInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := DecodeBody(Message{Body: []byte(npmBody), Attributes: map[string]string{AttrPayloadSize: "x"}}); !errors.Is(err, claimcheck.ErrTicketInvalid) {
		t.Errorf("bad marker: %v", err)
	}
}

// FuzzParseS3Payload: no input panics, every error wraps ErrTicketInvalid
// and names no key, and whatever parses has a bucket, a key and a size of
// -1 or more.
func FuzzParseS3Payload(f *testing.F) {
	f.Add([]byte(npmBody), "")
	f.Add([]byte(`{"S3Payload":{"Bucket":"b","Key":"k"}}`), "12")
	f.Add([]byte(`{"S3Payload":{"Bucket":"b","Key":"secret-key-\u00e9"}}`), "-1")
	f.Add([]byte(`{"S3Payload":[]}`), "")
	f.Add([]byte(`["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"b","s3Key":"k"}]`), "1")
	f.Fuzz(func(t *testing.T, body []byte, size string) {
		attrs := map[string]string{}
		if size != "" {
			attrs[AttrLegacyPayloadSize] = size
		}
		p, err := ParseS3Payload(body, attrs)
		if err != nil {
			if !errors.Is(err, claimcheck.ErrTicketInvalid) {
				t.Fatalf("error does not wrap ErrTicketInvalid: %v", err)
			}
			var v struct {
				S struct{ Key string } `json:"S3Payload"`
			}
			if json.Unmarshal(body, &v) == nil && len(v.S.Key) > 8 && strings.Contains(err.Error(), v.S.Key) {
				t.Fatalf("error names the key: %v", err)
			}
			return
		}
		if p.Bucket == "" || p.Key == "" || p.Size < -1 || (size == "" && p.Size != -1) {
			t.Fatalf("parsed %+v from %q", p, body)
		}
		d, err := DecodeBody(Message{Body: body, Attributes: attrs})
		if firstByte(body) == '{' && err == nil && d.Kind == KindPointer && (d.Pointer.Key != p.Key || d.Pointer.Bucket != p.Bucket) {
			t.Fatalf("DecodeBody and ParseS3Payload disagree: %+v, %+v", d.Pointer, p)
		}
	})
}

// TestPointerMessageMarker: the marker is written under the name asked
// for, ExtendedPayloadSize by default and SQSLargePayloadSize for legacy
// consumers, with data type Number as the AWS clients write it.
func TestPointerMessageMarker(t *testing.T) {
	tk := offloadedTicket(t)
	for marker, want := range map[string]string{"": AttrPayloadSize, AttrPayloadSize: AttrPayloadSize, AttrLegacyPayloadSize: AttrLegacyPayloadSize} {
		p := pointerTo("b", tk)
		p.Marker = marker
		m, err := p.Message(nil)
		if err != nil {
			t.Fatal(err)
		}
		other := AttrLegacyPayloadSize
		if want == other {
			other = AttrPayloadSize
		}
		if m.Attributes[want] != "4707275" || m.AttributeType(want) != AttrNumber || m.Attributes[other] != "" {
			t.Fatalf("marker %q: attributes %v, types %v", marker, m.Attributes, m.Types)
		}
		if m.AttributeType(AttrSHA256) != "String" {
			t.Fatalf("types %v", m.Types)
		}
		back, err := ParsePointer(m.Body, m.Attributes)
		if err != nil || back.Marker != want || back.Size != tk.Size {
			t.Fatalf("%+v %v", back, err)
		}
	}
	p := pointerTo("b", tk)
	p.Marker = "LargePayloadSize"
	if _, err := p.Message(nil); !errors.Is(err, claimcheck.ErrConfig) {
		t.Fatalf("unknown marker: %v", err)
	}
}

// TestPointerMessageS3Payload: the S3Payload body (sns-sqs-big-payload's
// default) names the same object, carries claimcheck's marker and digest
// attributes, and decodes back to the same verifiable pointer; with the
// legacy marker it is refused (that package's compatibility mode would
// read it as the AWS array).
func TestPointerMessageS3Payload(t *testing.T) {
	tk := offloadedTicket(t)
	p := pointerTo("claimcheck-payloads", tk)
	p.Body = PointerBodyS3Payload
	m, err := p.Message(map[string]string{AttrKind: "pdf"})
	if err != nil {
		t.Fatal(err)
	}
	wantBody := `{"S3Payload":{"Id":"` + testDigest + `","Bucket":"claimcheck-payloads","Key":"payloads/acme/` + testDigest + `","Location":"s3://claimcheck-payloads/payloads/acme/` + testDigest + `"}}`
	if string(m.Body) != wantBody {
		t.Fatalf("body\n got %s\nwant %s", m.Body, wantBody)
	}
	if m.Attributes[AttrPayloadSize] != "4707275" || m.AttributeType(AttrPayloadSize) != AttrNumber || m.Attributes[AttrSHA256] != testDigest {
		t.Fatalf("attributes %v types %v", m.Attributes, m.Types)
	}
	d, err := DecodeBody(m)
	want := Pointer{Bucket: "claimcheck-payloads", Key: tk.Key, Size: tk.Size, SHA256: tk.SHA256, Tenant: "acme", Marker: AttrPayloadSize}
	if err != nil || d.Kind != KindPointer || *d.Pointer != want {
		t.Fatalf("DecodeBody = %+v, %v; want %+v", d, err, want)
	}
	p.Marker = AttrLegacyPayloadSize
	if _, err := p.Message(nil); !errors.Is(err, claimcheck.ErrConfig) {
		t.Fatalf("S3Payload with the legacy marker: %v, want ErrConfig", err)
	}
	p.Marker, p.Body = "", "xml"
	if _, err := p.Message(nil); !errors.Is(err, claimcheck.ErrConfig) {
		t.Fatalf("body xml: %v, want ErrConfig", err)
	}
}
