<?php
/**
 * Client of the HTTP API of `claimcheck serve` (docs/openapi.yaml), on
 * PHP 8.1+ and its curl extension only.
 *
 * Client submits payloads (POST /v1/jobs), reads jobs (GET /v1/jobs/{id})
 * and fetches results (GET /v1/jobs/{id}/result); Client::claim and
 * Client::work are a worker over the worker endpoints (/v1/claims). Bodies
 * are streamed both ways through curl's read and write callbacks, CHUNK
 * bytes at a time, from and to files: memory does not grow with the
 * payload. Every payload and result is checked end to end: the client
 * sends the SHA-256 it computed (Content-Digest, RFC 9530), which the server
 * compares with its own before anything is enqueued, and verifies the
 * SHA-256 and size of what it receives (hash_init/hash_update as the bytes
 * arrive) before it keeps it.
 *
 * PHP runs one thread: while a handler runs, its lease is extended by a
 * child process (lease-keeper.php, started with proc_open on PHP_BINARY),
 * every lease_seconds / 3, until the attempt's outcome is recorded.
 */

declare(strict_types=1);

namespace ClaimCheck;

/** Bytes read or written at a time when hashing, uploading or downloading. */
const CHUNK = 1 << 20;

/** The states a job ends in (GET /v1/jobs/{id}: state, or dead). */
const FINAL_STATES = ['completed', 'cancelled', 'discarded'];

/**
 * An error answer of the API (docs/openapi.yaml, schema Error).
 *
 * $status is the HTTP status (0 when the server could not be reached);
 * $reason the machine-readable class (digest-mismatch, ticket-forbidden,
 * job-not-found, lease-not-found, payload-too-large, store-unavailable, …);
 * $permanent is false when the same request may succeed later (then
 * $retryAfter, in seconds, may say when). getMessage() is
 * "STATUS REASON: MESSAGE"; $apiMessage is the server's message alone.
 */
class ApiError extends \RuntimeException
{
    public function __construct(
        public readonly int $status,
        public readonly string $reason,
        public readonly string $apiMessage,
        public readonly bool $permanent,
        public readonly ?float $retryAfter = null,
    ) {
        parent::__construct("$status $reason: $apiMessage");
    }

    /** @return array{status:int, reason:string, message:string, permanent:bool} */
    public function toArray(): array
    {
        return ['status' => $this->status, 'reason' => $this->reason, 'message' => $this->apiMessage, 'permanent' => $this->permanent];
    }
}

/**
 * Bytes received do not match the SHA-256 or size they were announced
 * with (reason payload-corrupt). Names the sizes and digest prefixes,
 * never bytes.
 */
class PayloadCorruptError extends \UnexpectedValueException
{
    public const REASON = 'payload-corrupt';
}

/**
 * Thrown by a worker's handler: fail the job permanently (dead letter now,
 * reason handler-permanent) with getMessage() as its message. Any other
 * exception fails the attempt transiently: the retry policy retries it.
 */
class Permanent extends \RuntimeException
{
}

/**
 * What a handler returns: $body is a string of bytes, a readable stream
 * (read from where it stands), or null for no result; Result::file names a
 * file instead. $contentType is recorded in the result's ticket.
 */
final class Result
{
    /** @param string|resource|null $body */
    public function __construct(public readonly mixed $body = null, public readonly ?string $contentType = null, public readonly ?string $path = null)
    {
    }

    /** The result is the file at $path, streamed from it. */
    public static function file(string $path, ?string $contentType = null): self
    {
        return new self(null, $contentType, $path);
    }
}

/**
 * The Content-Digest field value for a SHA-256 (32 raw bytes; RFC 9530
 * section 2): sha-256=:BASE64:. Throws \InvalidArgumentException for any
 * other length.
 */
/**
 * W3C trace context headers: traceparent (and tracestate) when given.
 *
 * @return array<string, string>
 */
function trace_headers(?string $traceparent, ?string $tracestate): array
{
    if ($traceparent === null || $traceparent === '') {
        return [];
    }
    return ['traceparent' => $traceparent] + ($tracestate !== null && $tracestate !== '' ? ['tracestate' => $tracestate] : []);
}

function content_digest(string $sha256): string
{
    if (strlen($sha256) !== 32) {
        throw new \InvalidArgumentException('a SHA-256 is 32 bytes, not ' . strlen($sha256));
    }
    return 'sha-256=:' . base64_encode($sha256) . ':';
}

/**
 * The SHA-256 (32 raw bytes) a Content-Digest or Repr-Digest field value
 * gives, or null when it gives none (other algorithms are ignored). Throws
 * \UnexpectedValueException for a sha-256 member that is not 32 bytes of
 * base64.
 */
function parse_content_digest(string $value): ?string
{
    foreach (explode(',', $value) as $member) {
        if (preg_match('/^\s*([a-z0-9_-]+)\s*=\s*:([A-Za-z0-9+\/=]*):\s*$/', $member, $m) && $m[1] === 'sha-256') {
            $d = base64_decode($m[2], true);
            if ($d === false) {
                throw new \UnexpectedValueException('Content-Digest: sha-256 is not base64');
            }
            if (strlen($d) !== 32) {
                throw new \UnexpectedValueException('Content-Digest: sha-256 of ' . strlen($d) . ' bytes');
            }
            return $d;
        }
    }
    return null;
}

/**
 * SHA-256 (32 raw bytes) and size in bytes of a file (a path) or of a
 * stream read from where it stands to its end, CHUNK bytes at a time.
 *
 * @param string|resource $f
 * @return array{0:string, 1:int}
 */
function file_sha256(mixed $f): array
{
    if (is_string($f)) {
        $h = fopen($f, 'rb');
        if ($h === false) {
            throw new \RuntimeException("cannot open $f");
        }
        try {
            return file_sha256($h);
        } finally {
            fclose($h);
        }
    }
    $ctx = hash_init('sha256');
    $n = 0;
    while (!feof($f)) {
        $b = fread($f, CHUNK);
        if ($b === false) {
            throw new \RuntimeException('read failed');
        }
        hash_update($ctx, $b);
        $n += strlen($b);
    }
    return [hash_final($ctx, true), $n];
}

/**
 * A sink for a response body: writes it to $out as it arrives, hashing
 * and counting it, and checks at the end that it is exactly $size bytes
 * with SHA-256 $sha256 (raw; null: not checked).
 *
 * @internal
 */
final class Verifier
{
    private \HashContext $h;
    public int $size = 0;
    public ?string $sha256 = null;

    /** @param resource $out */
    public function __construct(private mixed $out, private ?string $wantSha256, private ?int $wantSize)
    {
        $this->h = hash_init('sha256');
    }

    public function write(string $data): bool
    {
        $this->size += strlen($data);
        if ($this->wantSize !== null && $this->size > $this->wantSize) {
            return false;
        }
        hash_update($this->h, $data);
        for ($off = 0; $off < strlen($data);) {
            $n = fwrite($this->out, $off === 0 ? $data : substr($data, $off));
            if ($n === false || $n === 0) {
                return false;
            }
            $off += $n;
        }
        return true;
    }

    /** Throws PayloadCorruptError unless the bytes are those announced. */
    public function finish(): void
    {
        $got = hash_final($this->h, true);
        if ($this->wantSize !== null && $this->size !== $this->wantSize) {
            throw new PayloadCorruptError($this->size > $this->wantSize
                ? "more than the {$this->wantSize} bytes announced"
                : "{$this->size} bytes, {$this->wantSize} announced");
        }
        if ($this->wantSha256 !== null && !hash_equals($this->wantSha256, $got)) {
            throw new PayloadCorruptError(sprintf('SHA-256 %s…, announced %s…', substr(bin2hex($got), 0, 12), substr(bin2hex($this->wantSha256), 0, 12)));
        }
        $this->sha256 = $got;
    }
}

/**
 * A client of one `claimcheck serve`.
 *
 * $baseUrl defaults to $CLAIMCHECK_API_URL (e.g. http://127.0.0.1:8080),
 * $token to $CLAIMCHECK_API_TOKEN (from `claimcheck tokens create`; none
 * needed on loopback when the server has no tokens). $timeout bounds, in
 * seconds, the connection and each stall of a transfer (curl's low-speed
 * limit: less than 1 byte/s for $timeout s), not a whole transfer.
 * Errors: ApiError for every error answer and for a server that cannot be
 * reached (status 0, reason unavailable, permanent false);
 * PayloadCorruptError for bytes that fail verification.
 */
class Client
{
    public readonly string $baseUrl;
    public readonly ?string $token;

    public function __construct(?string $baseUrl = null, ?string $token = null, public readonly float $timeout = 60.0)
    {
        $baseUrl = $baseUrl ?: (getenv('CLAIMCHECK_API_URL') ?: '');
        if ($baseUrl === '') {
            throw new \InvalidArgumentException('no API URL: give baseUrl or set CLAIMCHECK_API_URL');
        }
        $this->baseUrl = rtrim($baseUrl, '/');
        $this->token = $token ?? (getenv('CLAIMCHECK_API_TOKEN') ?: null);
    }

    // -- transport ---------------------------------------------------------

    /** @param list<array{0:string, 1:mixed}> $query */
    private function url(string $path, array $query = []): string
    {
        $parts = [];
        foreach ($query as [$k, $v]) {
            if ($v !== null) {
                $parts[] = rawurlencode($k) . '=' . rawurlencode((string) $v);
            }
        }
        return $this->baseUrl . $path . ($parts ? '?' . implode('&', $parts) : '');
    }

    /**
     * Send one request; return [status, headers (lower-case names), body]
     * for a status below 300, the body being '' when $sink took it; throw
     * ApiError for an error answer. $body is null, a string, or
     * [stream, size] streamed through CURLOPT_READFUNCTION; $sink(string):
     * bool gets the body of a successful answer as it arrives (false
     * aborts). GET redirects are followed without the token, up to 5.
     *
     * @internal
     * @param list<array{0:string, 1:mixed}> $query
     * @param array<string, string> $headers
     * @return array{0:int, 1:array<string,string>, 2:string}
     */
    public function request(string $method, string $path, array $query = [], array $headers = [], mixed $body = null, ?callable $sink = null, ?float $timeout = null): array
    {
        $url = $this->url($path, $query);
        for ($hop = 0; $hop < 6; $hop++) {
            $ch = curl_init($url);
            $hdrs = [];
            foreach ($headers as $k => $v) {
                $hdrs[] = "$k: $v";
            }
            if ($this->token !== null && $hop === 0) {
                $hdrs[] = 'Authorization: Bearer ' . $this->token;
            }
            $t = (int) ceil($timeout ?? $this->timeout);
            curl_setopt_array($ch, [
                CURLOPT_FOLLOWLOCATION => false,
                CURLOPT_CONNECTTIMEOUT => $t,
                CURLOPT_LOW_SPEED_LIMIT => 1,
                CURLOPT_LOW_SPEED_TIME => $t,
                CURLOPT_NOSIGNAL => true,
                CURLOPT_BUFFERSIZE => 256 << 10, // the largest write callback's chunk
            ]);
            if (defined('CURLOPT_UPLOAD_BUFFERSIZE')) {
                curl_setopt($ch, CURLOPT_UPLOAD_BUFFERSIZE, 1 << 20);
            }
            if ($method === 'GET') {
                curl_setopt($ch, CURLOPT_HTTPGET, true);
            } elseif (is_array($body)) {
                [$stream, $size] = $body;
                curl_setopt_array($ch, [
                    CURLOPT_UPLOAD => true,
                    CURLOPT_CUSTOMREQUEST => $method,
                    CURLOPT_INFILESIZE => $size,
                    CURLOPT_READFUNCTION => static function ($ch, $fd, int $len) use ($stream): string {
                        $b = fread($stream, min($len, CHUNK));
                        return $b === false ? '' : $b;
                    },
                ]);
            } else {
                curl_setopt_array($ch, [CURLOPT_CUSTOMREQUEST => $method, CURLOPT_POSTFIELDS => $body ?? '']);
            }
            curl_setopt($ch, CURLOPT_HTTPHEADER, $hdrs);

            $status = 0;
            $respHeaders = [];
            curl_setopt($ch, CURLOPT_HEADERFUNCTION, static function ($ch, string $line) use (&$status, &$respHeaders): int {
                if (preg_match('#^HTTP/\S+\s+(\d{3})#', $line, $m)) {
                    $status = (int) $m[1]; // a new answer (after 100 Continue): start over
                    $respHeaders = [];
                } elseif (($i = strpos($line, ':')) !== false) {
                    $respHeaders[strtolower(trim(substr($line, 0, $i)))] = trim(substr($line, $i + 1));
                }
                return strlen($line);
            });
            $buf = '';
            $sinkFailed = false;
            curl_setopt($ch, CURLOPT_WRITEFUNCTION, static function ($ch, string $data) use (&$status, &$buf, &$sinkFailed, $sink): int {
                if ($sink !== null && $status >= 200 && $status < 300) {
                    if (!$sink($data)) {
                        $sinkFailed = true;
                        return 0; // abort the transfer
                    }
                } elseif (strlen($buf) < (64 << 10)) {
                    $buf .= $data;
                }
                return strlen($data);
            });
            $ok = curl_exec($ch);
            $errno = curl_errno($ch);
            $error = curl_error($ch);
            curl_close($ch);
            if ($sinkFailed) {
                return [$status, $respHeaders, ''];
            }
            if ($ok === false || $errno !== 0) {
                throw new ApiError(0, 'unavailable', "$method $path: $error", false);
            }
            if (in_array($status, [301, 302, 303, 307, 308], true) && $method === 'GET' && isset($respHeaders['location'])) {
                $url = self::resolve($url, $respHeaders['location']);
                continue;
            }
            if ($status >= 300) {
                throw self::error($status, $respHeaders, $buf);
            }
            return [$status, $respHeaders, $buf];
        }
        throw new ApiError(0, 'bad-request', "$method $path: more than 5 redirects", true);
    }

    private static function resolve(string $base, string $loc): string
    {
        if (preg_match('#^[a-z][a-z0-9+.-]*://#i', $loc)) {
            return $loc;
        }
        $p = parse_url($base);
        $origin = $p['scheme'] . '://' . $p['host'] . (isset($p['port']) ? ':' . $p['port'] : '');
        if (str_starts_with($loc, '/')) {
            return $origin . $loc;
        }
        $dir = preg_replace('#/[^/]*$#', '/', $p['path'] ?? '/');
        return $origin . $dir . $loc;
    }

    /** @param array<string,string> $headers */
    private static function error(int $status, array $headers, string $raw): ApiError
    {
        $retry = $headers['retry-after'] ?? null;
        $retryAfter = is_numeric($retry) ? (float) $retry : null;
        $doc = json_decode($raw, true);
        if (is_array($doc)) {
            return new ApiError($status, (string) ($doc['reason'] ?? 'unknown') ?: 'unknown', (string) ($doc['message'] ?? ''), (bool) ($doc['permanent'] ?? $status < 500), $retryAfter);
        }
        return new ApiError($status, 'unknown', "HTTP $status without an error document", $status < 500, $retryAfter);
    }

    /**
     * @internal
     * @return mixed the decoded JSON answer, null for 204
     */
    public function json(string $method, string $path, array $query = [], array $headers = [], mixed $body = null, ?float $timeout = null): mixed
    {
        [$status, , $raw] = $this->request($method, $path, $query, $headers, $body, null, $timeout);
        if ($status === 204) {
            return null;
        }
        return json_decode($raw, true, 512, JSON_THROW_ON_ERROR);
    }

    /**
     * A readable stream for $payload (a string of bytes, a path given as
     * Result::file, or a stream) positioned where its bytes begin, its
     * SHA-256 (raw) and size, and whether the stream is ours to close. A
     * stream that cannot seek is spooled to a temporary file while it is
     * hashed.
     *
     * @internal
     * @return array{0:resource, 1:string, 2:int, 3:bool}
     */
    public static function measure(mixed $payload, ?string $path = null): array
    {
        if ($path !== null) {
            $f = fopen($path, 'rb');
            if ($f === false) {
                throw new \RuntimeException("cannot open $path");
            }
            [$sha, $size] = file_sha256($f);
            rewind($f);
            return [$f, $sha, $size, true];
        }
        if (is_string($payload)) {
            $f = fopen('php://temp', 'w+b');
            fwrite($f, $payload);
            rewind($f);
            return [$f, hash('sha256', $payload, true), strlen($payload), true];
        }
        if (!is_resource($payload)) {
            throw new \InvalidArgumentException('a payload is a string of bytes, a stream or Result::file');
        }
        $meta = stream_get_meta_data($payload);
        $start = $meta['seekable'] ? ftell($payload) : false;
        if ($start !== false) {
            [$sha, $size] = file_sha256($payload);
            fseek($payload, $start);
            return [$payload, $sha, $size, false];
        }
        $spool = tmpfile();
        $ctx = hash_init('sha256');
        $size = 0;
        while (!feof($payload)) {
            $b = fread($payload, CHUNK);
            if ($b === false) {
                throw new \RuntimeException('read failed');
            }
            if ($b === '') {
                continue;
            }
            hash_update($ctx, $b);
            $size += strlen($b);
            fwrite($spool, $b);
        }
        rewind($spool);
        return [$spool, hash_final($ctx, true), $size, true];
    }

    // -- producer ----------------------------------------------------------

    /**
     * Check $payload in and enqueue a job of $kind for $tenant.
     *
     * $payload is a string of bytes or a readable stream (read from where
     * it stands); submitFile takes a path. The client reads it once to
     * compute its SHA-256 and size (unless $sha256, raw, gives the digest
     * the caller already has), then streams it as the request body with
     * Content-Length and Content-Digest; the server enqueues nothing unless
     * the bytes it got have that digest. Returns the answer (Submitted: id,
     * kind, tenant, duplicate, ticket_bytes, ticket, store, attachments).
     * Throws ApiError: 422 digest-mismatch, 409 idempotency-conflict, 413
     * payload-too-large, 403 ticket-forbidden (a tenant the token may not
     * act on), 422 payload-empty (an empty payload or attachment without
     * $allowEmpty), 422 store-not-configured, …
     * $traceparent (and $tracestate), the W3C trace context of the
     * caller's span, make the job join the caller's trace.
     *
     * $store names the server's store the documents go to (serve's --store
     * NAME=URL). $attachments, instead of a payload ($payload null), are the
     * job's named documents (submit --attach NAME=FILE): name => a string of
     * bytes, a stream, or ['body' => bytes or stream | 'path' => file,
     * 'contentType' => type]; each is measured as a payload is, then all
     * are streamed as one multipart/form-data body, each part with its
     * Content-Digest; the server enqueues the job only if every one is
     * stored (400 ticket-invalid for a bad name).
     *
     * @param string|resource|null $payload
     * @param array<string, mixed>|null $attachments
     */
    public function submit(mixed $payload, string $kind, string $tenant, ?string $idempotencyKey = null, ?string $contentType = null, ?int $priority = null, ?int $maxAttempts = null, ?string $sha256 = null, ?string $path = null, bool $allowEmpty = false, ?string $store = null, ?array $attachments = null, ?string $traceparent = null, ?string $tracestate = null): array
    {
        $query = [['kind', $kind], ['tenant', $tenant], ['priority', $priority], ['max_attempts', $maxAttempts],
            ['allow_empty', $allowEmpty ? 'true' : null], ['store', $store]];
        if ($attachments !== null) {
            if ($payload !== null || $path !== null) {
                throw new \InvalidArgumentException('give a payload or attachments, not both');
            }
            return $this->submitAttachments($query, $attachments, $idempotencyKey, $traceparent, $tracestate);
        }
        [$f, $digest, $size, $ours] = self::measure($payload, $path);
        try {
            $headers = trace_headers($traceparent, $tracestate) + [
                'Content-Digest' => content_digest($sha256 ?? $digest),
                'Content-Type' => $contentType ?? 'application/octet-stream',
            ];
            if ($idempotencyKey !== null) {
                $headers['Idempotency-Key'] = $idempotencyKey;
            }
            return $this->json('POST', '/v1/jobs', $query, $headers, [$f, $size]);
        } finally {
            if ($ours) {
                fclose($f);
            }
        }
    }

    /**
     * @param list<array{0:string, 1:mixed}> $query
     * @param array<string, mixed> $attachments
     */
    private function submitAttachments(array $query, array $attachments, ?string $idempotencyKey, ?string $traceparent = null, ?string $tracestate = null): array
    {
        if ($attachments === []) {
            throw new \InvalidArgumentException('no attachments');
        }
        $boundary = 'claimcheck-' . bin2hex(random_bytes(16));
        $segments = [];
        $opened = [];
        try {
            foreach ($attachments as $name => $v) {
                $name = (string) $name;
                $spec = is_array($v) ? $v : ['body' => $v];
                [$f, $digest, $size, $ours] = self::measure($spec['body'] ?? null, $spec['path'] ?? null);
                if ($ours) {
                    $opened[] = $f;
                }
                $segments[] = "--$boundary\r\nContent-Disposition: form-data; name=\"$name\"\r\n"
                    . 'Content-Type: ' . ($spec['contentType'] ?? 'application/octet-stream') . "\r\n"
                    . 'Content-Digest: ' . content_digest($digest) . "\r\n\r\n";
                $segments[] = [$f, $size];
                $segments[] = "\r\n";
                $query[] = ['attach', $name];
            }
            $segments[] = "--$boundary--\r\n";
            $body = MultipartStream::open($segments);
            $headers = trace_headers($traceparent, $tracestate) + ['Content-Type' => "multipart/form-data; boundary=$boundary"];
            if ($idempotencyKey !== null) {
                $headers['Idempotency-Key'] = $idempotencyKey;
            }
            try {
                return $this->json('POST', '/v1/jobs', $query, $headers, $body);
            } finally {
                fclose($body[0]);
            }
        } finally {
            foreach ($opened as $f) {
                fclose($f);
            }
        }
    }

    /** submit() with the payload read from the file at $path. */
    public function submitFile(string $path, string $kind, string $tenant, ?string $idempotencyKey = null, ?string $contentType = null, ?int $priority = null, ?int $maxAttempts = null, ?string $sha256 = null): array
    {
        return $this->submit(null, $kind, $tenant, $idempotencyKey, $contentType, $priority, $maxAttempts, $sha256, $path);
    }

    /**
     * The job (schema Job: id, kind, tenant, state, dead, attempts,
     * max_attempts, reason, error, created_at, finalized_at, has_result).
     * Throws ApiError 404 job-not-found.
     */
    public function job(int $jobId): array
    {
        return $this->json('GET', "/v1/jobs/$jobId");
    }

    /**
     * A page of jobs, newest first (GET /v1/jobs): of $tenants (each one
     * the token's), else of all the token's tenants; $kind and $state
     * filter (state: dead, sent, retrying, or River's available, running,
     * retryable, scheduled, completed, cancelled, discarded, pending).
     * $limit is 1 to 1000 (default 100). Returns ['jobs' => [Job, ...],
     * 'next_after' => id]: pass next_after as $after for the next page (it
     * is absent on the last). Throws ApiError 400, 403 ticket-forbidden.
     *
     * @param list<string> $tenants
     */
    public function listJobs(?string $kind = null, ?string $state = null, array $tenants = [], ?int $limit = null, ?int $after = null): array
    {
        return $this->json('GET', '/v1/jobs', self::listQuery($kind, $state, $tenants, $limit, $after));
    }

    /**
     * A page of dead letters, newest first (GET /v1/dead), with their
     * reason and error; filters and paging as listJobs.
     *
     * @param list<string> $tenants
     */
    public function listDead(?string $kind = null, array $tenants = [], ?int $limit = null, ?int $after = null): array
    {
        return $this->json('GET', '/v1/dead', self::listQuery($kind, null, $tenants, $limit, $after));
    }

    /**
     * @param list<string> $tenants
     * @return list<array{0:string, 1:mixed}>
     */
    private static function listQuery(?string $kind, ?string $state, array $tenants, ?int $limit, ?int $after): array
    {
        $query = [['kind', $kind], ['state', $state], ['limit', $limit], ['after', $after]];
        foreach ($tenants as $t) {
            $query[] = ['tenant', $t];
        }
        return $query;
    }

    /**
     * Cancel a job that has not finished (POST /v1/jobs/{id}/cancel): a
     * queued one at once, a running one when its handler returns. Returns
     * the Job (a cancelled job is a dead letter). Throws ApiError 409
     * job-finished, 404 job-not-found (also for another tenant's job).
     */
    public function cancel(int $jobId): array
    {
        return $this->json('POST', "/v1/jobs/$jobId/cancel", [], [], '');
    }

    /**
     * Send a dead letter back to its queue (POST /v1/dead/{id}/replay)
     * once the server checked its payload still exists. Returns the Job.
     * Throws ApiError 409 payload-missing (expired or deleted), 409
     * not-dead, 404 job-not-found.
     */
    public function replay(int $jobId): array
    {
        return $this->json('POST', "/v1/dead/$jobId/replay", [], [], '');
    }

    /**
     * Poll the job every $interval seconds (doubling up to 5 s) until it is
     * completed or dead and return it; throws \RuntimeException (a
     * timeout) after $timeout seconds. $clock(): float and
     * $sleep(float): void are injectable for tests.
     */
    public function wait(int $jobId, float $timeout = 600.0, float $interval = 0.5, ?callable $clock = null, ?callable $sleep = null): array
    {
        $clock ??= static fn (): float => hrtime(true) / 1e9;
        $sleep ??= static function (float $s): void {
            usleep((int) ($s * 1e6));
        };
        $deadline = $clock() + $timeout;
        while (true) {
            $j = $this->job($jobId);
            if (!empty($j['dead']) || in_array($j['state'] ?? '', FINAL_STATES, true)) {
                return $j;
            }
            if ($clock() >= $deadline) {
                throw new \RuntimeException(sprintf('job %d still %s after %g s', $jobId, $j['state'] ?? '?', $timeout));
            }
            $sleep($interval);
            $interval = min($interval * 2, 5.0);
        }
    }

    /**
     * Stream the job's result into $dest (a path, written through a
     * temporary file in its directory renamed into place only once
     * verified, or a writable stream), verifying size and SHA-256 against
     * Content-Length and Content-Digest. Returns ['sha256' => hex, 'size'
     * => bytes, 'content_type' => …]. Throws ApiError (404 job-not-found,
     * 409 no-result while it has none yet, 410 when it expired, …),
     * PayloadCorruptError.
     *
     * @param string|resource $dest
     */
    public function fetchResult(int $jobId, mixed $dest): array
    {
        $tmp = null;
        $out = $dest;
        if (is_string($dest)) {
            $dir = realpath(dirname($dest));
            $tmp = $dir === false ? false : tempnam($dir, '.claimcheck-');
            if ($tmp === false) {
                throw new \RuntimeException('cannot make a temporary file beside ' . basename($dest));
            }
            $out = fopen($tmp, 'wb');
        }
        try {
            [$v, $headers] = $this->download("/v1/jobs/$jobId/result", $out, null, null);
            if ($tmp !== null) {
                fclose($out);
                $out = null;
                if (!rename($tmp, $dest)) {
                    throw new \RuntimeException("cannot rename the result into $dest");
                }
                $tmp = null;
            }
            return ['sha256' => bin2hex($v->sha256), 'size' => $v->size, 'content_type' => $headers['content-type'] ?? null];
        } finally {
            if ($tmp !== null) {
                if (is_resource($out)) {
                    fclose($out);
                }
                @unlink($tmp);
            }
        }
    }

    /**
     * GET $path into $out through a Verifier: against $sha256/$size when
     * given (a claim's), and Content-Digest/Content-Length (which must
     * agree with them). Returns the finished Verifier and the headers.
     *
     * @internal
     * @param resource $out
     * @return array{0:Verifier, 1:array<string,string>}
     */
    public function download(string $path, mixed $out, ?string $sha256, ?int $size): array
    {
        $v = new Verifier($out, $sha256, $size);
        [, $headers] = $this->request('GET', $path, [], [], null, $v->write(...));
        $announced = isset($headers['content-digest']) ? parse_content_digest($headers['content-digest']) : null;
        $length = isset($headers['content-length']) ? (int) $headers['content-length'] : null;
        if ($sha256 !== null && $announced !== null && !hash_equals($sha256, $announced)) {
            throw new PayloadCorruptError('Content-Digest is not the SHA-256 the claim announced');
        }
        if ($size !== null && $length !== null && $length !== $size) {
            throw new PayloadCorruptError("Content-Length $length, the claim announced $size bytes");
        }
        $v->finish(); // against the claim's figures, if any
        $wantSha = $announced ?? $sha256;
        $wantSize = $length ?? $size;
        if ($wantSize !== null && $v->size !== $wantSize) {
            throw new PayloadCorruptError(sprintf('%d bytes, %d announced', $v->size, $wantSize));
        }
        if ($wantSha !== null && !hash_equals($wantSha, $v->sha256)) {
            throw new PayloadCorruptError(sprintf('SHA-256 %s…, announced %s…', substr(bin2hex($v->sha256), 0, 12), substr(bin2hex($wantSha), 0, 12)));
        }
        return [$v, $headers];
    }

    // -- worker ------------------------------------------------------------

    /**
     * Claim the next job of $kind (of $tenants, default all the token may
     * act on), waiting up to $wait seconds (0 to 60) for one; null if none
     * came. The job is held under a lease of lease_seconds: extend it
     * (Claim::extend) before it runs out, then complete or fail it. Throws
     * ApiError.
     *
     * @param list<string> $tenants
     */
    public function claim(string $kind, array $tenants = [], int $wait = 30): ?Claim
    {
        $query = [['kind', $kind], ['wait', $wait]];
        foreach ($tenants as $t) {
            $query[] = ['tenant', $t];
        }
        [$status, $headers, $raw] = $this->request('POST', '/v1/claims', $query, [], '', null, $this->timeout + $wait);
        if ($status === 204) {
            return null;
        }
        return new Claim($this, json_decode($raw, true, 512, JSON_THROW_ON_ERROR), $headers['traceparent'] ?? null, $headers['tracestate'] ?? null);
    }

    /**
     * Work jobs of $kind until $stop() returns true, $maxJobs were handled,
     * or ($untilEmpty) a claim waited $wait seconds for nothing. Returns
     * the number of jobs handled.
     *
     * For each job, $handler(Claim $claim, resource $payload) gets the
     * payload as a stream of a temporary file, positioned at its start,
     * holding the bytes verified against the claim's SHA-256 and size as
     * they arrived; it returns a Result, a string of bytes, a stream, or
     * null (no result). While the payload downloads, the handler runs and
     * its outcome is recorded, the lease is extended every lease_seconds /
     * 3 by a child process. A handler that throws Permanent fails the job
     * permanently; any other \Throwable fails the attempt transiently (the
     * message is the exception's class and text: keep payload bytes out of
     * it). $onOutcome(Claim, array $outcome) sees each Outcome (state
     * completed, retrying, waiting, dead, released, or lost: the lease ran
     * out or could not be settled, and the job is back with the server's
     * retry policy). Transient errors of the claim are retried after
     * Retry-After (or 1 s); others are thrown.
     *
     * @param list<string> $tenants
     */
    public function work(string $kind, callable $handler, array $tenants = [], int $wait = 30, ?int $maxJobs = null, bool $untilEmpty = false, ?callable $stop = null, ?callable $onOutcome = null): int
    {
        $done = 0;
        while (!($stop !== null && $stop()) && ($maxJobs === null || $done < $maxJobs)) {
            try {
                $c = $this->claim($kind, $tenants, $wait);
            } catch (ApiError $e) {
                if ($e->permanent) {
                    throw $e;
                }
                usleep((int) (($e->retryAfter ?? 1.0) * 1e6));
                continue;
            }
            if ($c === null) {
                if ($untilEmpty) {
                    break;
                }
                continue;
            }
            try {
                $outcome = $c->run($handler);
            } catch (ApiError $e) {
                // The lease ran out (404 lease-not-found: the job went back
                // to its queue for another attempt), or the server could
                // not be reached to settle it: the job is no longer ours.
                if ($e->status !== 404 && $e->permanent) {
                    throw $e;
                }
                $outcome = ['id' => $c->job['id'], 'state' => 'lost', 'attempt' => $c->job['attempt'], 'reason' => $e->reason, 'message' => $e->apiMessage];
            }
            $done++;
            if ($onOutcome !== null) {
                $onOutcome($c, $outcome);
            }
        }
        return $done;
    }
}

/**
 * A claimed job under a lease (schema Claim): lease, lease_seconds,
 * lease_expires_at, job {id, kind, tenant, attempt}, payload (its ticket
 * summary: sha256 hex, size bytes, type, inline, created, and kid
 * for a payload sealed inline).
 */
/**
 * A read-only stream of segments, one after the other: strings, and
 * [stream, size] pairs read size bytes from where they stand. It is a
 * multipart body streamed through curl's read callback without holding
 * its parts (a stream wrapper, the one thing fread reads).
 *
 * @internal
 */
final class MultipartStream
{
    private const SCHEME = 'claimcheck-multipart';
    /** @var array<string, list<string|array{0:resource, 1:int}>> */
    private static array $pending = [];
    /** @var resource|null */
    public $context;
    /** @var list<string|array{0:resource, 1:int}> */
    private array $segments = [];
    private int $i = 0;
    private int $left = -1;

    /**
     * A stream over $segments and its size in bytes.
     *
     * @param list<string|array{0:resource, 1:int}> $segments
     * @return array{0:resource, 1:int}
     */
    public static function open(array $segments): array
    {
        if (!in_array(self::SCHEME, stream_get_wrappers(), true)) {
            stream_wrapper_register(self::SCHEME, self::class);
        }
        $id = bin2hex(random_bytes(8));
        self::$pending[$id] = $segments;
        $size = 0;
        foreach ($segments as $seg) {
            $size += is_string($seg) ? strlen($seg) : $seg[1];
        }
        $f = fopen(self::SCHEME . '://' . $id, 'rb');
        return [$f, $size];
    }

    public function stream_open(string $path, string $mode, int $options, ?string &$opened): bool
    {
        $id = substr($path, strlen(self::SCHEME) + 3);
        if (!isset(self::$pending[$id])) {
            return false;
        }
        $this->segments = self::$pending[$id];
        unset(self::$pending[$id]);
        return true;
    }

    public function stream_read(int $count): string|false
    {
        while ($this->i < count($this->segments)) {
            $seg = $this->segments[$this->i];
            if (is_string($seg)) {
                $this->i++;
                if ($seg !== '') {
                    return $seg;
                }
                continue;
            }
            [$f, $size] = $seg;
            if ($this->left < 0) {
                $this->left = $size;
            }
            if ($this->left > 0) {
                $b = fread($f, min($count, $this->left, CHUNK));
                if ($b === false || $b === '') {
                    throw new \RuntimeException('an attachment ended before the size it was measured at');
                }
                $this->left -= strlen($b);
                return $b;
            }
            $this->left = -1;
            $this->i++;
        }
        return '';
    }

    public function stream_eof(): bool
    {
        return $this->i >= count($this->segments);
    }

    /** @return array<string, int> */
    public function stream_stat(): array
    {
        return [];
    }
}

class Claim
{
    public readonly string $lease;
    public readonly int $leaseSeconds;
    public readonly array $job;
    public readonly array $payload;
    /** @var array<string, array> the job's attachments by name (ticket summaries), empty without */
    public readonly array $attachments;
    private string $leaseExpiresAt;
    private int $extensions = 0;
    private ?ApiError $lost = null;
    /** @var resource|null the lease keeper's process while it runs */
    private mixed $keeper = null;
    /** @var array<int, resource> */
    private array $pipes = [];
    private string $partial = '';

    /**
     * $traceparent and $tracestate are the job's W3C trace context (the
     * claim's response headers), null when it has none: a handler's spans
     * continue it, and the lease's calls send it.
     */
    public function __construct(public readonly Client $client, public readonly array $doc, public readonly ?string $traceparent = null, public readonly ?string $tracestate = null)
    {
        $this->lease = $doc['lease'];
        $this->leaseSeconds = (int) $doc['lease_seconds'];
        $this->leaseExpiresAt = $doc['lease_expires_at'];
        $this->job = $doc['job'];
        $this->payload = $doc['payload'];
        $atts = [];
        foreach ($doc['attachments'] ?? [] as $a) {
            $atts[$a['name']] = $a;
        }
        $this->attachments = $atts;
    }

    private function path(string $op): string
    {
        return '/v1/claims/' . rawurlencode($this->lease) . '/' . $op;
    }

    /** When the lease runs out (RFC 3339), as last renewed. */
    public function leaseExpiresAt(): string
    {
        $this->poll();
        return $this->leaseExpiresAt;
    }

    /**
     * The id of the key that sealed the payload inline (its ticket's "kid",
     * docs/ticket.md), such as "local-3f303a29d311937f"; null for a plain or
     * offloaded payload.
     */
    public function keyId(): ?string
    {
        $kid = $this->payload['kid'] ?? null;
        return is_string($kid) && $kid !== '' ? $kid : null;
    }

    /** Leases renewed so far (by extend() and by the lease keeper). */
    public function extensions(): int
    {
        $this->poll();
        return $this->extensions;
    }

    /** The ApiError (404 lease-not-found) of an extension that found the lease gone, or null. */
    public function lost(): ?ApiError
    {
        $this->poll();
        return $this->lost;
    }

    /**
     * Download the payload into $out (a writable stream), verified against
     * the claim's SHA-256 and size as it arrives. Throws ApiError,
     * PayloadCorruptError.
     *
     * @param resource $out
     */
    public function downloadPayload(mixed $out): void
    {
        $this->client->download($this->path('payload'), $out, hex2bin($this->payload['sha256']), (int) $this->payload['size']);
    }

    /**
     * Download attachment $name into $out (a writable stream), verified
     * against the claim's SHA-256 and size for it as it arrives. Throws
     * \OutOfBoundsException for a name the claim does not list, ApiError,
     * PayloadCorruptError.
     *
     * @param resource $out
     */
    public function downloadAttachment(string $name, mixed $out): void
    {
        $a = $this->attachments[$name] ?? throw new \OutOfBoundsException("the claim has no attachment $name");
        $this->client->download($this->path('attachments/' . rawurlencode($name)), $out, hex2bin($a['sha256']), (int) $a['size']);
    }

    /**
     * Renew the lease for another lease_seconds; returns the claim document.
     * Throws ApiError 404 lease-not-found once it ran out.
     */
    public function extend(): array
    {
        $doc = $this->client->json('POST', $this->path('extend'), [], trace_headers($this->traceparent, $this->tracestate), '');
        $this->extensions++;
        $this->leaseExpiresAt = $doc['lease_expires_at'] ?? $this->leaseExpiresAt;
        return $doc;
    }

    /**
     * Complete the job with $result (a string of bytes, a stream, a
     * Result, or null for none), streamed with its SHA-256 in
     * Content-Digest. Returns the Outcome. Throws ApiError (404
     * lease-not-found, 422 digest-mismatch, 413 …).
     */
    public function complete(mixed $result = null, ?string $contentType = null): array
    {
        $path = null;
        if ($result instanceof Result) {
            [$path, $contentType, $result] = [$result->path, $result->contentType ?? $contentType, $result->body];
        }
        if ($result === null && $path === null) {
            return $this->client->json('POST', $this->path('complete'), [], trace_headers($this->traceparent, $this->tracestate), '');
        }
        [$f, $digest, $size, $ours] = Client::measure($result, $path);
        try {
            $headers = ['Content-Digest' => content_digest($digest), 'Content-Type' => $contentType ?? 'application/octet-stream'];
            return $this->client->json('POST', $this->path('complete'), [], trace_headers($this->traceparent, $this->tracestate) + $headers, [$f, $size]);
        } finally {
            if ($ours) {
                fclose($f);
            }
        }
    }

    /**
     * Fail the attempt: permanently (dead letter now) or transiently (the
     * retry policy retries it). $message (the server keeps its first 1024
     * characters; sent cut at 4096 bytes) is recorded on the job. Returns the Outcome.
     */
    public function fail(string $message, bool $permanent = false): array
    {
        $body = json_encode(['message' => substr($message, 0, 4096), 'permanent' => $permanent], JSON_THROW_ON_ERROR | JSON_INVALID_UTF8_SUBSTITUTE);
        return $this->client->json('POST', $this->path('fail'), [], trace_headers($this->traceparent, $this->tracestate) + ['Content-Type' => 'application/json'], $body);
    }

    /** Run $handler on this claim as Client::work does and return the Outcome. */
    public function run(callable $handler): array
    {
        $this->startKeeper();
        $payload = tmpfile();
        try {
            try {
                $this->downloadPayload($payload);
                rewind($payload);
                $out = $handler($this, $payload);
            } catch (Permanent $e) {
                return $this->fail($e->getMessage() ?: 'permanent failure', true);
            } catch (PayloadCorruptError $e) {
                return $this->fail('payload-corrupt: ' . $e->getMessage(), false);
            } catch (\Throwable $e) { // the handler's failure: transient
                return $this->fail((new \ReflectionClass($e))->getShortName() . ': ' . $e->getMessage(), false);
            }
            return $this->complete($out);
        } finally {
            fclose($payload);
            $this->stopKeeper();
        }
    }

    /**
     * Start the lease keeper: a child PHP process (lease-keeper.php) that
     * extends the lease every lease_seconds / 3 and prints each new expiry
     * (or the loss of the lease) a JSON line; it stops when its standard
     * input closes. The token goes in its environment, not its arguments.
     */
    private function startKeeper(): void
    {
        $env = getenv();
        $env['CLAIMCHECK_API_URL'] = $this->client->baseUrl;
        $env['CLAIMCHECK_API_TOKEN'] = $this->client->token ?? '';
        $env['CLAIMCHECK_KEEPER_LEASE'] = $this->lease;
        $env['CLAIMCHECK_KEEPER_EVERY'] = (string) max($this->leaseSeconds / 3, 0.2);
        $env['CLAIMCHECK_KEEPER_TIMEOUT'] = (string) $this->client->timeout;
        $p = proc_open([PHP_BINARY, __DIR__ . '/lease-keeper.php'], [0 => ['pipe', 'r'], 1 => ['pipe', 'w'], 2 => STDERR], $pipes, null, $env);
        if (!is_resource($p)) {
            throw new \RuntimeException('cannot start the lease keeper (' . PHP_BINARY . ')');
        }
        stream_set_blocking($pipes[1], false);
        [$this->keeper, $this->pipes] = [$p, $pipes];
    }

    private function stopKeeper(): void
    {
        if ($this->keeper === null) {
            return;
        }
        fclose($this->pipes[0]); // the keeper's signal to stop
        stream_set_blocking($this->pipes[1], true);
        $this->poll(true);
        fclose($this->pipes[1]);
        proc_close($this->keeper);
        $this->keeper = null;
    }

    /** Read what the keeper reported so far (to its end when $all). */
    private function poll(bool $all = false): void
    {
        if ($this->keeper === null) {
            return;
        }
        while (($b = fread($this->pipes[1], 8192)) !== false && $b !== '') {
            $this->partial .= $b;
        }
        while (($i = strpos($this->partial, "\n")) !== false) {
            $line = substr($this->partial, 0, $i);
            $this->partial = substr($this->partial, $i + 1);
            $m = json_decode($line, true);
            if (isset($m['lease_expires_at'])) {
                $this->extensions++;
                $this->leaseExpiresAt = $m['lease_expires_at'];
            } elseif (isset($m['lost'])) {
                $this->lost = new ApiError((int) $m['lost']['status'], (string) $m['lost']['reason'], (string) $m['lost']['message'], (bool) $m['lost']['permanent']);
            }
        }
    }
}
