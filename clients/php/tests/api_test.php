<?php
/**
 * The client against a real `claimcheck serve`: the Go test TestClientsAPI
 * (clients/api_test.go) starts one and sets CLAIMCHECK_API_URL,
 * CLAIMCHECK_API_TOKEN and CLAIMCHECK_API_TENANT (the token's tenant). Each
 * test uses job kinds of its own, so the tests share the server's queues
 * without taking each other's jobs. Run: php tests/api_test.php; it prints
 * a TAP line a test and "# pass N", "# fail N", "# skipped N", and exits 1
 * if any failed. No test framework: PHP 8 and its curl extension only.
 */

declare(strict_types=1);

require __DIR__ . '/../src/ClaimCheck.php';

use ClaimCheck\ApiError;
use ClaimCheck\Claim;
use ClaimCheck\Client;
use ClaimCheck\PayloadCorruptError;
use ClaimCheck\Permanent;
use ClaimCheck\Result;
use ClaimCheck\Verifier;

use function ClaimCheck\content_digest;
use function ClaimCheck\parse_content_digest;

$URL = getenv('CLAIMCHECK_API_URL') ?: null;
$TENANT = getenv('CLAIMCHECK_API_TENANT') ?: 'acme';
$SKIP = $URL ? null : 'CLAIMCHECK_API_URL is not set: go test -run TestClientsAPI ./clients starts a serve and sets it';

final class AssertionFailed extends Exception
{
}

function check(bool $ok, string $what): void
{
    if (!$ok) {
        throw new AssertionFailed($what);
    }
}

function eq(mixed $want, mixed $got, string $what): void
{
    check($want === $got, sprintf('%s: got %s, want %s', $what, json_encode($got), json_encode($want)));
}

/** The ApiError $f throws; fails if it throws none. */
function api_error(callable $f): ApiError
{
    try {
        $f();
    } catch (ApiError $e) {
        return $e;
    }
    throw new AssertionFailed('no ApiError was thrown');
}

function kind(string $name): string
{
    return "php-$name-" . bin2hex(random_bytes(4));
}

/** The job once its attempt is recorded (the outcome answers before the job engine writes the row). */
function settled(Client $c, int $id): array
{
    $deadline = microtime(true) + 60;
    while (true) {
        $j = $c->job($id);
        if ($j['state'] !== 'running' || microtime(true) > $deadline) {
            return $j;
        }
        usleep(100_000);
    }
}

/** @return array{0: Claim, 1: array} */
function work_one(Client $c, string $k, callable $handler): array
{
    $outcomes = [];
    $n = $c->work($k, $handler, wait: 10, maxJobs: 1, onOutcome: function (Claim $cl, array $o) use (&$outcomes) {
        $outcomes[] = [$cl, $o];
    });
    eq(1, $n, 'jobs worked');
    return $outcomes[0];
}

$tests = [];
function test(string $name, ?string $skip, callable $f): void
{
    $GLOBALS['tests'][] = [$name, $skip, $f];
}

test('submit, work, result', $SKIP, function () use ($TENANT) {
    $c = new Client();
    $k = kind('roundtrip');
    $payload = random_bytes(300_000);
    $s = $c->submit($payload, $k, $TENANT, contentType: 'application/x-test');
    eq($k, $s['kind'], 'kind');
    eq($TENANT, $s['tenant'], 'tenant');
    eq(false, $s['duplicate'], 'duplicate');
    eq(hash('sha256', $payload), $s['ticket']['sha256'], 'ticket sha256');
    eq(strlen($payload), $s['ticket']['size'], 'ticket size');
    check($s['ticket_bytes'] <= 512, 'ticket_bytes ' . $s['ticket_bytes']);
    [$claim, $o] = work_one($c, $k, function (Claim $claim, $stream) use ($s) {
        eq($s['id'], $claim->job['id'], 'claimed job');
        eq($s['ticket']['sha256'], $claim->payload['sha256'], 'claim sha256');
        return new Result(strrev(stream_get_contents($stream)), 'application/x-reversed');
    });
    eq('completed', $o['state'], 'outcome');
    eq(1, $o['attempt'], 'attempt');
    $j = $c->wait($s['id'], timeout: 60);
    eq('completed', $j['state'], 'state');
    eq(true, $j['has_result'], 'has_result');
    $dir = sys_get_temp_dir() . '/cc-php-' . bin2hex(random_bytes(4));
    mkdir($dir);
    try {
        $r = $c->fetchResult($s['id'], "$dir/result");
        eq(strrev($payload), file_get_contents("$dir/result"), 'the result file');
        eq(hash('sha256', strrev($payload)), $r['sha256'], 'result sha256');
        eq(strlen($payload), $r['size'], 'result size');
        eq('application/x-reversed', $r['content_type'], 'result content type');
        eq(['result'], array_values(array_diff(scandir($dir), ['.', '..'])), 'files left'); // no temporary file
    } finally {
        array_map('unlink', array_filter(glob("$dir/{,.}*", GLOB_BRACE) ?: [], 'is_file'));
        @rmdir($dir);
    }
    // Into a stream too.
    $f = fopen('php://temp', 'w+b');
    $c->fetchResult($s['id'], $f);
    rewind($f);
    eq(strrev($payload), stream_get_contents($f), 'the result streamed');
});

test('submit from a stream that cannot seek (spooled)', $SKIP, function () use ($TENANT) {
    $c = new Client();
    $k = kind('pipe');
    $data = random_bytes(3 << 20);
    $file = tempnam(sys_get_temp_dir(), 'cc-php-');
    file_put_contents($file, $data);
    try {
        $p = proc_open([PHP_BINARY, '-r', 'readfile($argv[1]);', $file], [1 => ['pipe', 'w']], $pipes);
        check(!stream_get_meta_data($pipes[1])['seekable'], 'the pipe is seekable');
        $s = $c->submit($pipes[1], $k, $TENANT);
        fclose($pipes[1]);
        proc_close($p);
    } finally {
        unlink($file);
    }
    eq(hash('sha256', $data), $s['ticket']['sha256'], 'ticket sha256');
    eq(strlen($data), $s['ticket']['size'], 'ticket size');
    [, $o] = work_one($c, $k, fn () => null); // no result
    eq('completed', $o['state'], 'outcome');
    eq(false, $c->wait($s['id'], timeout: 60)['has_result'], 'has_result');
    $e = api_error(fn () => $c->fetchResult($s['id'], fopen('php://memory', 'w+b')));
    eq([409, 'no-result'], [$e->status, $e->reason], 'a result of a job without one');
});

test('a payload sealed inline names its key', $SKIP, function () use ($TENANT) {
    // The deployment seals with its key file: a small payload travels
    // sealed inline, and its ticket names the key (kid).
    $c = new Client();
    $k = kind('kid');
    $s = $c->submit('small, sealed inline', $k, $TENANT);
    eq(true, $s['ticket']['inline'], 'inline');
    check(preg_match('/^local-[0-9a-f]{16}$/', $s['ticket']['kid'] ?? '') === 1, 'kid ' . ($s['ticket']['kid'] ?? '(none)'));
    $seen = null;
    [, $o] = work_one($c, $k, function (Claim $claim) use (&$seen) {
        $seen = $claim->keyId();
        return null;
    });
    eq('completed', $o['state'], 'outcome');
    eq($s['ticket']['kid'], $seen, 'claim keyId');
});

test('idempotency key', $SKIP, function () use ($TENANT) {
    $c = new Client();
    $k = kind('idem');
    $first = $c->submit('invoice 42', $k, $TENANT, idempotencyKey: 'invoice-42');
    $mem = fopen('php://memory', 'w+b');
    fwrite($mem, 'invoice 42');
    rewind($mem);
    $again = $c->submit($mem, $k, $TENANT, idempotencyKey: 'invoice-42');
    eq(false, $first['duplicate'], 'first duplicate');
    eq(true, $again['duplicate'], 'again duplicate');
    eq($first['id'], $again['id'], 'the same job');
    $e = api_error(fn () => $c->submit('invoice 43', $k, $TENANT, idempotencyKey: 'invoice-42'));
    eq([409, 'idempotency-conflict'], [$e->status, $e->reason], 'another payload under the key');
});

test('digest mismatch refused', $SKIP, function () use ($TENANT) {
    $c = new Client();
    $e = api_error(fn () => $c->submit('the bytes sent', kind('mismatch'), $TENANT, sha256: hash('sha256', 'other bytes', true)));
    eq([422, 'digest-mismatch', true], [$e->status, $e->reason, $e->permanent], 'refusal');
    check(!str_contains($e->getMessage(), 'the bytes sent'), 'the error names payload bytes');
});

test('fail permanent: dead', $SKIP, function () use ($TENANT) {
    $c = new Client();
    $k = kind('perm');
    $s = $c->submit('cannot be rendered', $k, $TENANT);
    [, $o] = work_one($c, $k, fn () => throw new Permanent('unsupported document'));
    eq('dead', $o['state'], 'outcome');
    $j = settled($c, $s['id']);
    eq(true, $j['dead'], 'dead');
    eq(1, $j['attempts'], 'attempts');
    check(str_contains($j['error'], 'unsupported document'), 'error ' . $j['error']);
});

test('fail transient: retried', $SKIP, function () use ($TENANT) {
    $c = new Client();
    $k = kind('trans');
    $s = $c->submit('try again', $k, $TENANT, maxAttempts: 3);
    [, $o] = work_one($c, $k, fn () => throw new RuntimeException('renderer went away'));
    check(in_array($o['state'], ['retrying', 'waiting'], true), 'outcome ' . $o['state']);
    eq(1, $o['attempt'], 'attempt');
    $j = settled($c, $s['id']);
    eq(false, $j['dead'], 'dead');
    check(in_array($j['state'], ['retryable', 'available', 'scheduled'], true), 'state ' . $j['state']);
    check(str_contains($j['error'], 'RuntimeException: renderer went away'), 'error ' . $j['error']);
});

test('lease extended while the handler runs', $SKIP, function () use ($TENANT) {
    $c = new Client();
    $k = kind('slow');
    $s = $c->submit('slow work', $k, $TENANT);
    [$claim, $o] = work_one($c, $k, function (Claim $claim) {
        $first = $claim->leaseExpiresAt();
        $deadline = microtime(true) + 2 * $claim->leaseSeconds;
        while ($claim->extensions() < 1 && microtime(true) < $deadline) {
            usleep(100_000);
        }
        check($claim->extensions() >= 1, 'the lease was not extended');
        eq(null, $claim->lost(), 'lost');
        check($claim->leaseExpiresAt() !== $first, 'lease_expires_at did not move');
        return 'done';
    });
    eq(['completed', 1], [$o['state'], $o['attempt']], 'outcome');
    eq(1, settled($c, $s['id'])['attempts'], 'attempts');
    // Once completed, the lease is gone.
    $e = api_error(fn () => $claim->extend());
    eq([404, 'lease-not-found'], [$e->status, $e->reason], 'extend after complete');
});

test('claim waits, then answers null', $SKIP, function () {
    $t0 = microtime(true);
    eq(null, (new Client())->claim(kind('empty'), wait: 1), 'claim');
    check(microtime(true) - $t0 >= 0.9, 'the claim did not wait');
});

test('job not found', $SKIP, function () {
    $e = api_error(fn () => (new Client())->job(2 ** 62));
    eq([404, 'job-not-found'], [$e->status, $e->reason], 'refusal');
});

test('unreachable server is transient', null, function () {
    $e = api_error(fn () => (new Client('http://127.0.0.1:9', null, 5))->job(1));
    eq([0, 'unavailable', false], [$e->status, $e->reason, $e->permanent], 'error');
});

test('wait gives up on its clock', $SKIP, function () use ($TENANT) {
    $c = new Client();
    $s = $c->submit('nobody works this', kind('never'), $TENANT);
    $now = 0.0;
    $slept = [];
    try {
        $c->wait($s['id'], timeout: 20, interval: 1, clock: function () use (&$now) {
            return $now;
        }, sleep: function (float $d) use (&$now, &$slept) {
            $slept[] = $d;
            $now += $d;
        });
        throw new AssertionFailed('wait returned');
    } catch (RuntimeException $e) {
        check(str_contains($e->getMessage(), 'after 20 s'), $e->getMessage());
    }
    eq([1.0, 2.0, 4.0, 5.0], array_slice($slept, 0, 4), 'sleeps'); // doubling, at most 5 s
});

test('Content-Digest', null, function () {
    $d = hash('sha256', 'abc', true);
    $v = content_digest($d);
    eq('sha-256=:ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=:', $v, 'field'); // RFC 9530 style
    eq($d, parse_content_digest("sha-512=:AAAA:, $v"), 'parsed');
    eq(null, parse_content_digest('sha-512=:AAAA:'), 'no sha-256');
    try {
        parse_content_digest('sha-256=:AAAA:');
        throw new AssertionFailed('a 3-byte sha-256 was accepted');
    } catch (UnexpectedValueException) {
    }
});

test('Verifier refuses other bytes, and more bytes', null, function () {
    $out = fopen('php://memory', 'w+b');
    $v = new Verifier($out, hash('sha256', 'expected', true), 8);
    check($v->write('unexpect'), 'write');
    try {
        $v->finish();
        throw new AssertionFailed('other bytes were accepted');
    } catch (PayloadCorruptError $e) {
        check(str_starts_with($e->getMessage(), 'SHA-256 '), $e->getMessage());
        check(!str_contains($e->getMessage(), 'unexpect'), 'the error names payload bytes');
    }
    $v = new Verifier($out, null, 4);
    check(!$v->write('12345'), 'a fifth byte of four was taken');
});

test('list jobs, cancel, list dead letters, replay', $SKIP, function () use ($TENANT) {
    $c = new Client();
    $k = kind('list');
    $ids = [];
    for ($i = 0; $i < 3; $i++) {
        $ids[] = $c->submit("job $i", $k, $TENANT)['id'];
    }
    $newest = array_reverse($ids);
    $page = $c->listJobs(kind: $k, limit: 2);
    eq(array_slice($newest, 0, 2), array_column($page['jobs'], 'id'), 'first page');
    $rest = $c->listJobs(kind: $k, limit: 2, after: $page['next_after']);
    eq(array_slice($newest, 2), array_column($rest['jobs'], 'id'), 'second page');
    check(!isset($rest['next_after']), 'the last page has a next_after');
    foreach ($c->listJobs()['jobs'] as $j) {
        eq($TENANT, $j['tenant'], 'tenant of a listed job');
    }

    $j = $c->cancel($ids[0]);
    eq(['cancelled', true], [$j['state'], $j['dead']], 'cancelled job');
    $e = api_error(fn () => $c->cancel($ids[0]));
    eq([409, 'job-finished'], [$e->status, $e->reason], 'second cancel');
    eq([$ids[0]], array_column($c->listDead(kind: $k)['jobs'], 'id'), 'dead letters');
    eq(array_slice($newest, 0, 2), array_column($c->listJobs(kind: $k, state: 'available')['jobs'], 'id'), 'available jobs');

    $j = $c->replay($ids[0]);
    eq(['available', false], [$j['state'], $j['dead']], 'replayed job');
    $e = api_error(fn () => $c->replay($ids[0]));
    eq([409, 'not-dead'], [$e->status, $e->reason], 'second replay');
    eq([], $c->listDead(kind: $k)['jobs'], 'dead letters after the replay');
    $e = api_error(fn () => $c->cancel(10 ** 15));
    eq([404, 'job-not-found'], [$e->status, $e->reason], 'cancel of a missing job');
});

test('allow empty', $SKIP, function () use ($TENANT) {
    $c = new Client();
    $k = kind('empty');
    $e = api_error(fn () => $c->submit('', $k, $TENANT));
    eq([422, 'payload-empty'], [$e->status, $e->reason], 'an empty payload without allowEmpty');
    eq(0, $c->submit('', $k, $TENANT, allowEmpty: true)['ticket']['size'], 'size of an empty payload allowed');
});

test('attachments and a named store', $SKIP, function () use ($TENANT) {
    $c = new Client();
    $k = kind('attach');
    $invoice = random_bytes(200_000);
    $terms = 'terms and conditions';
    $stream = fopen('php://temp', 'w+b');
    fwrite($stream, $terms);
    rewind($stream);
    $s = $c->submit(null, $k, $TENANT, store: 'cold', attachments: [
        'invoice.pdf' => ['body' => $invoice, 'contentType' => 'application/pdf'],
        'terms.txt' => $stream,
    ]);
    fclose($stream);
    eq([['invoice.pdf', 'terms.txt'], 'cold'], [$s['attachments'], $s['store']], 'submitted');
    eq('cold', $c->job($s['id'])['store'], "the job's store");
    $got = [];
    [, $outcome] = work_one($c, $k, function (Claim $claim, $payload) use (&$got) {
        eq('', stream_get_contents($payload), 'the main payload of a job of attachments');
        eq('application/pdf', $claim->attachments['invoice.pdf']['type'], "invoice's type");
        foreach (array_keys($claim->attachments) as $name) {
            $out = fopen('php://temp', 'w+b');
            $claim->downloadAttachment($name, $out);
            rewind($out);
            $got[$name] = stream_get_contents($out);
            fclose($out);
        }
        return new Result('ok', 'text/plain');
    });
    eq('completed', $outcome['state'], 'outcome');
    check($got === ['invoice.pdf' => $invoice, 'terms.txt' => $terms], 'the attachments as submitted');

    $e = api_error(fn () => $c->submit(null, $k, $TENANT, attachments: ['../x' => 'a']));
    eq([400, 'ticket-invalid'], [$e->status, $e->reason], 'a name with a path');
    $e = api_error(fn () => $c->submit(null, $k, $TENANT, attachments: ['a.txt' => 'a', 'b.txt' => '']));
    eq([422, 'payload-empty'], [$e->status, $e->reason], 'an empty attachment');
    $e = api_error(fn () => $c->submit('x', $k, $TENANT, store: 'nowhere'));
    eq([422, 'store-not-configured'], [$e->status, $e->reason], 'an unknown store');
    eq([$s['id']], array_column($c->listJobs(kind: $k)['jobs'], 'id'), 'jobs after the refusals');
});

$pass = $fail = $skipped = 0;
foreach ($tests as $i => [$name, $skip, $f]) {
    $n = $i + 1;
    if ($skip !== null) {
        echo "ok $n - $name # SKIP $skip\n";
        $skipped++;
        continue;
    }
    $t0 = microtime(true);
    try {
        $f();
        printf("ok %d - %s (%.2f s)\n", $n, $name, microtime(true) - $t0);
        $pass++;
    } catch (Throwable $e) {
        echo "not ok $n - $name\n# ", str_replace("\n", "\n# ", get_class($e) . ': ' . $e->getMessage() . "\n" . $e->getTraceAsString()), "\n";
        $fail++;
    }
}
echo "1..", count($tests), "\n# pass $pass\n# fail $fail\n# skipped $skipped\n";
exit($fail > 0 ? 1 : 0);
