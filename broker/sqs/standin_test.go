package sqs

// This file is a STAND-IN for Amazon SQS, not SQS: no local server here
// speaks the current SQS JSON protocol, so the tests run the real SDK client
// against this in-test httptest.Server. It speaks the AWS JSON 1.0 protocol
// the SDK uses for SQS (POST /, X-Amz-Target: AmazonSQS.<Operation>, JSON
// bodies, errors as {"__type": ..., "message": ...}) and implements only the
// operations the transport uses: SendMessageBatch, SendMessage,
// ReceiveMessage, DeleteMessage, ChangeMessageVisibility and
// GetQueueAttributes (MaximumMessageSize, QueueArn, RedrivePolicy, as set
// by the test; the redrive itself is not performed), on standard and FIFO
// queues created by the test (no CreateQueue).
//
// SQS's documented limits it enforces:
//   - MaximumMessageSize per queue (default 262,144 bytes), counted as SQS
//     counts: body plus every attribute's name, data type and value, in
//     UTF-8 bytes; the same maximum for a SendMessageBatch's total;
//   - at most 10 entries per batch, distinct entry ids, none empty;
//   - at most 10 message attributes, DataType String/Number/Binary, no
//     empty values, names not starting with AWS. or Amazon.;
//   - visibility timeout 0..43,200 s (queue default 30 s), DelaySeconds
//     0..900, MaxNumberOfMessages 1..10, WaitTimeSeconds 0..20 (long
//     polling until a message is visible or the wait ends, whether or not
//     the client is still there, as on SQS and fauxqs);
//   - ApproximateReceiveCount incremented on every receive, and a new
//     ReceiptHandle on every receive; only the latest handle of an
//     in-flight message is accepted by ChangeMessageVisibility, and
//     DeleteMessage takes the latest handle (older ones are refused here,
//     which is stricter than SQS).
//
// FIFO queues (names ending in ".fifo"), as far as modelled: every send
// needs a MessageGroupId and a MessageDeduplicationId (1 to 128 printable
// ASCII characters; no content-based deduplication), per-message
// DelaySeconds is refused, and a send whose deduplication id the queue saw
// in the last 5 minutes succeeds with the first message's id and enqueues
// nothing. A standard queue refuses MessageDeduplicationId. Ordering and
// message-group blocking on receive are NOT modelled (FIFO queues deliver
// like standard ones here).
//
// Not modelled: redrive policies, retention, MD5 of attributes (the SDK
// validates only body MD5s, which are returned), IAM, signatures (accepted
// unchecked; the access key and credential scope of every request's
// Authorization header are recorded for tests).

import (
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const standInDefaultMaxSize = 262144

type standInMsg struct {
	id        string
	body      string
	attrs     map[string]standInAttr
	sent      time.Time
	visibleAt time.Time
	receives  int
	handle    string // latest receipt handle, "" if never received
	group     string // MessageGroupId, "" if none
	dedup     string // MessageDeduplicationId, "" if none
}

type standInAttr struct {
	DataType    string `json:"DataType"`
	StringValue string `json:"StringValue,omitempty"`
}

type standInQueue struct {
	arn        string
	redrive    string // RedrivePolicy attribute, as set by the test
	maxSize    int64
	visibility time.Duration
	msgs       []*standInMsg
	fifo       bool
	dedup      map[string]standInDedup // FIFO: by MessageDeduplicationId
}

// standInDedup is a FIFO queue's record of a deduplication id.
type standInDedup struct {
	id   string // MessageId of the first message sent with it
	seen time.Time
}

// standInDedupInterval is SQS's FIFO deduplication interval.
const standInDedupInterval = 5 * time.Minute

// standInSQS is the stand-in server's state.
type standInSQS struct {
	srv *httptest.Server

	mu     sync.Mutex
	queues map[string]*standInQueue // by URL
	notify chan struct{}            // closed and replaced on every send/visibility change

	// Test hooks and counters.
	failEntry func(body string) bool // entries it reports as Failed
	batches   []standInBatch         // every accepted SendMessageBatch
	scopes    []string               // Credential= of every request's Authorization header
}

type standInBatch struct {
	entries int
	size    int64
}

func newStandInSQS(t *testing.T) *standInSQS {
	s := &standInSQS{queues: map[string]*standInQueue{}, notify: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

// createQueue makes a standard queue and returns its URL.
func (s *standInSQS) createQueue(name string, maxSize int64) string {
	if maxSize == 0 {
		maxSize = standInDefaultMaxSize
	}
	url := s.srv.URL + "/000000000000/" + name
	s.mu.Lock()
	s.queues[url] = &standInQueue{arn: "arn:aws:sqs:us-east-1:000000000000:" + name, maxSize: maxSize, visibility: 30 * time.Second,
		fifo: strings.HasSuffix(name, ".fifo"), dedup: map[string]standInDedup{}}
	s.mu.Unlock()
	return url
}

// visible counts the messages visible in the queue now.
func (s *standInSQS) count(url string) (visible, inflight int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for _, m := range s.queues[url].msgs {
		if m.visibleAt.After(now) {
			inflight++
		} else {
			visible++
		}
	}
	return
}

type standInError struct {
	status int
	typ    string
	query  string
	msg    string
}

func errInvalid(format string, a ...any) *standInError {
	return &standInError{400, "com.amazonaws.sqs#InvalidParameterValue", "InvalidParameterValue", fmt.Sprintf(format, a...)}
}

func (s *standInSQS) serve(w http.ResponseWriter, r *http.Request) {
	if _, cred, ok := strings.Cut(r.Header.Get("Authorization"), "Credential="); ok {
		cred, _, _ = strings.Cut(cred, ",")
		s.mu.Lock()
		s.scopes = append(s.scopes, cred)
		s.mu.Unlock()
	}
	op, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), "AmazonSQS.")
	if r.Method != http.MethodPost || !ok || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-amz-json-1.0") {
		writeErr(w, &standInError{400, "com.amazonaws.sqs#InvalidAction", "AWS.SimpleQueueService.InvalidAction", "stand-in: not an AWS JSON 1.0 SQS request"})
		return
	}
	var in map[string]json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeErr(w, &standInError{400, "com.amazonaws.sqs#InvalidParameterValue", "InvalidParameterValue", "stand-in: malformed JSON: " + err.Error()})
		return
	}
	var out any
	var serr *standInError
	switch op {
	case "SendMessageBatch":
		out, serr = s.sendMessageBatch(in)
	case "SendMessage":
		out, serr = s.sendMessage(in)
	case "ReceiveMessage":
		out, serr = s.receiveMessage(r, in)
	case "DeleteMessage":
		out, serr = s.deleteMessage(in)
	case "ChangeMessageVisibility":
		out, serr = s.changeVisibility(in)
	case "GetQueueAttributes":
		out, serr = s.getQueueAttributes(in)
	default:
		serr = &standInError{400, "com.amazonaws.sqs#InvalidAction", "AWS.SimpleQueueService.InvalidAction", "stand-in: operation not implemented: " + op}
	}
	if serr != nil {
		writeErr(w, serr)
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	json.NewEncoder(w).Encode(out)
}

func writeErr(w http.ResponseWriter, e *standInError) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amzn-Query-Error", e.query+";Sender")
	w.WriteHeader(e.status)
	json.NewEncoder(w).Encode(map[string]string{"__type": e.typ, "message": e.msg})
}

func str(in map[string]json.RawMessage, k string) string {
	var v string
	json.Unmarshal(in[k], &v)
	return v
}

func num(in map[string]json.RawMessage, k string) (int64, bool) {
	raw, ok := in[k]
	if !ok {
		return 0, false
	}
	var v int64
	if json.Unmarshal(raw, &v) != nil {
		return 0, false
	}
	return v, true
}

// queue returns the queue named by QueueUrl; the caller holds s.mu.
func (s *standInSQS) queue(in map[string]json.RawMessage) (*standInQueue, *standInError) {
	q := s.queues[str(in, "QueueUrl")]
	if q == nil {
		return nil, &standInError{400, "com.amazonaws.sqs#QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue", "The specified queue does not exist."}
	}
	return q, nil
}

func newToken(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func md5hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// msgSize is SQS's count: body plus each attribute's name, type and value.
func msgSize(body string, attrs map[string]standInAttr) int64 {
	n := int64(len(body))
	for k, a := range attrs {
		n += int64(len(k) + len(a.DataType) + len(a.StringValue))
	}
	return n
}

func checkAttrs(attrs map[string]standInAttr) *standInError {
	if len(attrs) > 10 {
		return errInvalid("Number of message attributes [%d] exceeds the allowed maximum [10].", len(attrs))
	}
	for k, a := range attrs {
		if k == "" || strings.HasPrefix(strings.ToLower(k), "aws.") || strings.HasPrefix(strings.ToLower(k), "amazon.") {
			return errInvalid("Message (user) attribute name '%s' is invalid.", k)
		}
		switch strings.SplitN(a.DataType, ".", 2)[0] {
		case "String", "Number", "Binary":
		default:
			return errInvalid("The type of message (user) attribute '%s' is invalid.", k)
		}
		if a.StringValue == "" {
			return errInvalid("Message (user) attribute '%s' must contain a non-empty value of type '%s'.", k, a.DataType)
		}
	}
	return nil
}

type sendEntry struct {
	Id                     string                 `json:"Id"`
	MessageBody            *string                `json:"MessageBody"`
	DelaySeconds           *int64                 `json:"DelaySeconds"`
	MessageAttributes      map[string]standInAttr `json:"MessageAttributes"`
	MessageGroupId         *string                `json:"MessageGroupId"`
	MessageDeduplicationId *string                `json:"MessageDeduplicationId"`
}

// fifoID reports whether SQS accepts s as a MessageGroupId or
// MessageDeduplicationId.
func fifoID(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// standInCheckFIFO validates a send's FIFO parameters for q; it returns the
// first message's id if the send is a duplicate. The caller holds s.mu.
func standInCheckFIFO(q *standInQueue, e sendEntry) (dupOf string, serr *standInError) {
	if !q.fifo {
		if e.MessageDeduplicationId != nil {
			return "", errInvalid("The request include parameter that is not valid for this queue type")
		}
		return "", nil
	}
	if e.MessageGroupId == nil {
		return "", &standInError{400, "com.amazonaws.sqs#MissingParameter", "MissingParameter", "The request must contain the parameter MessageGroupId."}
	}
	if !fifoID(*e.MessageGroupId) {
		return "", errInvalid("Value %s for parameter MessageGroupId is invalid.", *e.MessageGroupId)
	}
	if e.MessageDeduplicationId == nil {
		return "", errInvalid("The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly")
	}
	if !fifoID(*e.MessageDeduplicationId) {
		return "", errInvalid("Value %s for parameter MessageDeduplicationId is invalid.", *e.MessageDeduplicationId)
	}
	if e.DelaySeconds != nil && *e.DelaySeconds != 0 {
		return "", errInvalid("Value %d for parameter DelaySeconds is invalid. Reason: The request include parameter that is not valid for this queue type.", *e.DelaySeconds)
	}
	if d, ok := q.dedup[*e.MessageDeduplicationId]; ok && time.Since(d.seen) < standInDedupInterval {
		return d.id, nil
	}
	return "", nil
}

// enqueue validates and stores one message; the caller holds s.mu.
func (s *standInSQS) enqueue(q *standInQueue, e sendEntry) (*standInMsg, *standInError) {
	if e.MessageBody == nil || *e.MessageBody == "" {
		return nil, &standInError{400, "com.amazonaws.sqs#MissingParameter", "MissingParameter", "The request must contain the parameter MessageBody."}
	}
	if err := checkAttrs(e.MessageAttributes); err != nil {
		return nil, err
	}
	if n := msgSize(*e.MessageBody, e.MessageAttributes); n > q.maxSize {
		return nil, errInvalid("One or more parameters are invalid. Reason: Message must be shorter than %d bytes.", q.maxSize)
	}
	dupOf, serr := standInCheckFIFO(q, e)
	if serr != nil {
		return nil, serr
	}
	if dupOf != "" {
		// Accepted and dropped, as SQS does within the interval.
		return &standInMsg{id: dupOf, body: *e.MessageBody}, nil
	}
	delay := int64(0)
	if e.DelaySeconds != nil {
		delay = *e.DelaySeconds
	}
	if delay < 0 || delay > 900 {
		return nil, errInvalid("Value %d for parameter DelaySeconds is invalid. Reason: must be between 0 and 900.", delay)
	}
	now := time.Now()
	m := &standInMsg{id: newToken(16), body: *e.MessageBody, attrs: e.MessageAttributes, sent: now, visibleAt: now.Add(time.Duration(delay) * time.Second)}
	if e.MessageGroupId != nil {
		m.group = *e.MessageGroupId
	}
	if e.MessageDeduplicationId != nil {
		m.dedup = *e.MessageDeduplicationId
		if q.fifo {
			q.dedup[m.dedup] = standInDedup{id: m.id, seen: now}
		}
	}
	q.msgs = append(q.msgs, m)
	return m, nil
}

func (s *standInSQS) wake() {
	close(s.notify)
	s.notify = make(chan struct{})
}

func (s *standInSQS) sendMessageBatch(in map[string]json.RawMessage) (any, *standInError) {
	var entries []sendEntry
	if err := json.Unmarshal(in["Entries"], &entries); err != nil {
		return nil, errInvalid("stand-in: bad Entries: %v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q, serr := s.queue(in)
	if serr != nil {
		return nil, serr
	}
	if len(entries) == 0 {
		return nil, &standInError{400, "com.amazonaws.sqs#EmptyBatchRequest", "AWS.SimpleQueueService.EmptyBatchRequest", "There should be at least one SendMessageBatchRequestEntry in the request."}
	}
	if len(entries) > 10 {
		return nil, &standInError{400, "com.amazonaws.sqs#TooManyEntriesInBatchRequest", "AWS.SimpleQueueService.TooManyEntriesInBatchRequest", fmt.Sprintf("Maximum number of entries per request are 10. You have sent %d.", len(entries))}
	}
	ids := map[string]bool{}
	var total int64
	for _, e := range entries {
		if len(e.Id) > 80 || strings.Trim(e.Id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != "" {
			return nil, &standInError{400, "com.amazonaws.sqs#InvalidBatchEntryId", "AWS.SimpleQueueService.InvalidBatchEntryId", "A batch entry id can only contain alphanumeric characters, hyphens and underscores, at most 80."}
		}
		if e.Id == "" || ids[e.Id] {
			return nil, &standInError{400, "com.amazonaws.sqs#BatchEntryIdsNotDistinct", "AWS.SimpleQueueService.BatchEntryIdsNotDistinct", "Id " + e.Id + " repeated or empty."}
		}
		ids[e.Id] = true
		if e.MessageBody != nil {
			total += msgSize(*e.MessageBody, e.MessageAttributes)
		}
	}
	if total > q.maxSize {
		return nil, &standInError{400, "com.amazonaws.sqs#BatchRequestTooLong", "AWS.SimpleQueueService.BatchRequestTooLong", fmt.Sprintf("Batch requests cannot be longer than %d bytes. You have sent %d bytes.", q.maxSize, total)}
	}
	s.batches = append(s.batches, standInBatch{entries: len(entries), size: total})
	type ok struct {
		Id, MessageId, MD5OfMessageBody string
	}
	type failed struct {
		Id          string
		SenderFault bool
		Code        string
		Message     string
	}
	out := struct {
		Successful []ok     `json:"Successful"`
		Failed     []failed `json:"Failed"`
	}{Successful: []ok{}, Failed: []failed{}}
	for _, e := range entries {
		if s.failEntry != nil && e.MessageBody != nil && s.failEntry(*e.MessageBody) {
			out.Failed = append(out.Failed, failed{e.Id, false, "InternalError", "stand-in: injected failure"})
			continue
		}
		m, serr := s.enqueue(q, e)
		if serr != nil {
			out.Failed = append(out.Failed, failed{e.Id, true, serr.query, serr.msg})
			continue
		}
		out.Successful = append(out.Successful, ok{e.Id, m.id, md5hex(m.body)})
	}
	s.wake()
	return out, nil
}

func (s *standInSQS) sendMessage(in map[string]json.RawMessage) (any, *standInError) {
	var e sendEntry
	raw, _ := json.Marshal(in)
	if err := json.Unmarshal(raw, &e); err != nil {
		return nil, errInvalid("stand-in: bad request: %v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q, serr := s.queue(in)
	if serr != nil {
		return nil, serr
	}
	m, serr := s.enqueue(q, e)
	if serr != nil {
		return nil, serr
	}
	s.wake()
	return map[string]string{"MessageId": m.id, "MD5OfMessageBody": md5hex(m.body)}, nil
}

func (s *standInSQS) receiveMessage(r *http.Request, in map[string]json.RawMessage) (any, *standInError) {
	maxN, ok := num(in, "MaxNumberOfMessages")
	if !ok {
		maxN = 1
	}
	if maxN < 1 || maxN > 10 {
		return nil, errInvalid("Value %d for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided.", maxN)
	}
	wait, _ := num(in, "WaitTimeSeconds")
	if wait < 0 || wait > 20 {
		return nil, errInvalid("Value %d for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided.", wait)
	}
	vis, hasVis := num(in, "VisibilityTimeout")
	if vis < 0 || vis > 43200 {
		return nil, errInvalid("Value %d for parameter VisibilityTimeout is invalid. Reason: Must be between 0 and 43200.", vis)
	}
	var attrNames, sysNames []string
	json.Unmarshal(in["MessageAttributeNames"], &attrNames)
	json.Unmarshal(in["MessageSystemAttributeNames"], &sysNames)
	deadline := time.Now().Add(time.Duration(wait) * time.Second)
	type msg struct {
		MessageId         string                 `json:"MessageId"`
		ReceiptHandle     string                 `json:"ReceiptHandle"`
		MD5OfBody         string                 `json:"MD5OfBody"`
		Body              string                 `json:"Body"`
		Attributes        map[string]string      `json:"Attributes,omitempty"`
		MessageAttributes map[string]standInAttr `json:"MessageAttributes,omitempty"`
	}
	for {
		s.mu.Lock()
		q, serr := s.queue(in)
		if serr != nil {
			s.mu.Unlock()
			return nil, serr
		}
		now := time.Now()
		visibility := q.visibility
		if hasVis {
			visibility = time.Duration(vis) * time.Second
		}
		var out []msg
		var next time.Time
		for _, m := range q.msgs {
			if len(out) == int(maxN) {
				break
			}
			if m.visibleAt.After(now) {
				if next.IsZero() || m.visibleAt.Before(next) {
					next = m.visibleAt
				}
				continue
			}
			m.receives++
			m.handle = newToken(32)
			m.visibleAt = now.Add(visibility)
			o := msg{MessageId: m.id, ReceiptHandle: m.handle, MD5OfBody: md5hex(m.body), Body: m.body}
			for _, n := range sysNames {
				if n == "All" || n == "ApproximateReceiveCount" {
					o.Attributes = map[string]string{"ApproximateReceiveCount": strconv.Itoa(m.receives)}
				}
			}
			for k, a := range m.attrs {
				for _, n := range attrNames {
					if n == "All" || n == ".*" || n == k || (strings.HasSuffix(n, ".*") && strings.HasPrefix(k, strings.TrimSuffix(n, "*"))) {
						if o.MessageAttributes == nil {
							o.MessageAttributes = map[string]standInAttr{}
						}
						o.MessageAttributes[k] = a
						break
					}
				}
			}
			out = append(out, o)
		}
		notify := s.notify
		s.mu.Unlock()
		if len(out) > 0 || !now.Before(deadline) {
			return map[string]any{"Messages": out}, nil
		}
		wakeAt := deadline
		if !next.IsZero() && next.Before(wakeAt) {
			wakeAt = next
		}
		timer := time.NewTimer(time.Until(wakeAt))
		// As SQS does, the poll goes on when its client has gone: a
		// message it takes then stays hidden for its visibility timeout
		// (TestCancelledReceiveGivesBack).
		select {
		case <-notify:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// find returns the message whose latest receipt handle is h; s.mu held.
func (q *standInQueue) find(h string) (int, *standInMsg) {
	for i, m := range q.msgs {
		if m.handle != "" && m.handle == h {
			return i, m
		}
	}
	return -1, nil
}

func errHandle(h string) *standInError {
	return &standInError{400, "com.amazonaws.sqs#ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid", fmt.Sprintf("The input receipt handle %q is not a valid receipt handle (stand-in: unknown, stale or already deleted).", h)}
}

func (s *standInSQS) deleteMessage(in map[string]json.RawMessage) (any, *standInError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, serr := s.queue(in)
	if serr != nil {
		return nil, serr
	}
	h := str(in, "ReceiptHandle")
	i, _ := q.find(h)
	if i < 0 {
		return nil, errHandle(h)
	}
	q.msgs = append(q.msgs[:i], q.msgs[i+1:]...)
	return struct{}{}, nil
}

func (s *standInSQS) changeVisibility(in map[string]json.RawMessage) (any, *standInError) {
	vis, ok := num(in, "VisibilityTimeout")
	if !ok {
		return nil, &standInError{400, "com.amazonaws.sqs#MissingParameter", "MissingParameter", "The request must contain the parameter VisibilityTimeout."}
	}
	if vis < 0 || vis > 43200 {
		return nil, errInvalid("Value %d for parameter VisibilityTimeout is invalid. Reason: Must be between 0 and 43200.", vis)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q, serr := s.queue(in)
	if serr != nil {
		return nil, serr
	}
	h := str(in, "ReceiptHandle")
	_, m := q.find(h)
	if m == nil {
		return nil, errHandle(h)
	}
	now := time.Now()
	if !m.visibleAt.After(now) {
		return nil, &standInError{400, "com.amazonaws.sqs#MessageNotInflight", "AWS.SimpleQueueService.MessageNotInflight", "The message referred to is not in flight."}
	}
	m.visibleAt = now.Add(time.Duration(vis) * time.Second)
	s.wake()
	return struct{}{}, nil
}

func (s *standInSQS) getQueueAttributes(in map[string]json.RawMessage) (any, *standInError) {
	var names []string
	json.Unmarshal(in["AttributeNames"], &names)
	s.mu.Lock()
	defer s.mu.Unlock()
	q, serr := s.queue(in)
	if serr != nil {
		return nil, serr
	}
	all := map[string]string{
		"MaximumMessageSize": strconv.FormatInt(q.maxSize, 10),
		"QueueArn":           q.arn,
		"VisibilityTimeout":  strconv.Itoa(int(q.visibility / time.Second)),
	}
	if q.redrive != "" {
		all["RedrivePolicy"] = q.redrive
	}
	out := map[string]string{}
	for _, n := range names {
		if n == "All" {
			out = all
			break
		}
		if v, ok := all[n]; ok {
			out[n] = v
		}
	}
	return map[string]any{"Attributes": out}, nil
}

// setRedrive sets a queue's RedrivePolicy attribute (test set-up).
func (s *standInSQS) setRedrive(url, policy string) {
	s.mu.Lock()
	s.queues[url].redrive = policy
	s.mu.Unlock()
}

// fifoIDs returns the MessageGroupId and MessageDeduplicationId of every
// message in a queue, in order.
func (s *standInSQS) fifoIDs(url string) (groups, dedups []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.queues[url].msgs {
		groups = append(groups, m.group)
		dedups = append(dedups, m.dedup)
	}
	return groups, dedups
}

// credentialScopes returns the Credential= of every request so far
// ("AKID/date/region/sqs/aws4_request").
func (s *standInSQS) credentialScopes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.scopes...)
}

// arn returns a queue's ARN.
func (s *standInSQS) arn(url string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queues[url].arn
}
