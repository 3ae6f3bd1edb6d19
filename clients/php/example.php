<?php
/**
 * Example program of the PHP client: a producer and a worker of
 * `claimcheck serve`'s HTTP API. Every line it prints is one JSON object.
 *
 *   php example.php submit --kind K --tenant T [--idempotency-key X] FILE...
 *       submit each file (streamed, its SHA-256 sent as Content-Digest);
 *       prints {"file", "job", "sha256", "size", "duplicate", "ticket_bytes"}
 *   php example.php work --kind K [--tenant T]... [--until-empty] [--max-jobs N]
 *                   [--wait S] [--delay S] [--fail permanent|transient]
 *       work jobs: the handler reads the verified payload and returns a JSON
 *       summary {"worker": "php", "job", "attempt", "sha256", "size",
 *       "magic"} as the result (after --delay seconds, the lease extended
 *       meanwhile); prints {"job", "state", "attempt", "extensions"} a job
 *   php example.php status JOB       prints the job
 *   php example.php result JOB OUT   waits for the job, streams its result
 *       into OUT (verified); prints {"job", "state", "sha256", "size",
 *       "result"} (result: the result's JSON, when it is JSON)
 *
 * The server is $CLAIMCHECK_API_URL; the token, if any, $CLAIMCHECK_API_TOKEN.
 * An error answer prints {"error": {"status", "reason", "message",
 * "permanent"}} and exits 1.
 */

declare(strict_types=1);

require __DIR__ . '/src/ClaimCheck.php';

use ClaimCheck\ApiError;
use ClaimCheck\Claim;
use ClaimCheck\Client;
use ClaimCheck\PayloadCorruptError;
use ClaimCheck\Permanent;
use ClaimCheck\Result;

use function ClaimCheck\file_sha256;

function out(array $doc): void
{
    ksort($doc);
    echo json_encode($doc, JSON_UNESCAPED_SLASHES), "\n";
}

/** @return array{0: array<string, list<string>|string|bool>, 1: list<string>} */
function parse_args(array $args): array
{
    $flags = ['until-empty'];
    $opts = [];
    $pos = [];
    for ($i = 0; $i < count($args); $i++) {
        $a = $args[$i];
        if (!str_starts_with($a, '--')) {
            $pos[] = $a;
            continue;
        }
        $name = substr($a, 2);
        if (in_array($name, $flags, true)) {
            $opts[$name] = true;
            continue;
        }
        if (!isset($args[$i + 1])) {
            fwrite(STDERR, "$a needs a value\n");
            exit(2);
        }
        $opts[$name][] = $args[++$i];
    }
    return [$opts, $pos];
}

function opt(array $o, string $name, ?string $default = null): ?string
{
    return isset($o[$name]) ? end($o[$name]) : $default;
}

/** The bytes as Latin-1 text, in UTF-8 (as the other clients print magic). */
function latin1_to_utf8(string $b): string
{
    $s = '';
    foreach (str_split($b) as $ch) {
        $o = ord($ch);
        $s .= $o < 0x80 ? $ch : chr(0xC0 | ($o >> 6)) . chr(0x80 | ($o & 0x3F));
    }
    return $s;
}

function submit(Client $c, array $o, array $files): void
{
    foreach ($files as $file) {
        $want = opt($o, 'sha256');
        $s = $c->submitFile($file, opt($o, 'kind'), opt($o, 'tenant'), idempotencyKey: opt($o, 'idempotency-key'),
            contentType: opt($o, 'content-type', 'application/pdf'), sha256: $want === null ? null : hex2bin($want));
        [$sha, $size] = file_sha256($file);
        if ($s['ticket']['sha256'] !== bin2hex($sha) || $s['ticket']['size'] !== $size) {
            throw new RuntimeException("$file: the server's ticket does not describe the file sent");
        }
        out(['file' => $file, 'job' => $s['id'], 'sha256' => $s['ticket']['sha256'], 'size' => $s['ticket']['size'],
            'duplicate' => $s['duplicate'], 'ticket_bytes' => $s['ticket_bytes']]);
    }
}

function work(Client $c, array $o): void
{
    $handler = function (Claim $claim, $payload) use ($o): Result {
        $h = hash_init('sha256');
        $size = 0;
        $magic = '';
        while (!feof($payload)) {
            $b = fread($payload, 1 << 20);
            if (strlen($magic) < 5) {
                $magic .= substr($b, 0, 5 - strlen($magic));
            }
            hash_update($h, $b);
            $size += strlen($b);
        }
        if ($d = (float) opt($o, 'delay', '0')) {
            usleep((int) ($d * 1e6));
        }
        match (opt($o, 'fail')) {
            'permanent' => throw new Permanent('the example was told to fail permanently'),
            'transient' => throw new RuntimeException('the example was told to fail transiently'),
            default => null,
        };
        $summary = ['attempt' => $claim->job['attempt'], 'job' => $claim->job['id'], 'magic' => latin1_to_utf8($magic),
            'sha256' => hash_final($h), 'size' => $size, 'worker' => 'php'];
        return new Result(json_encode($summary), 'application/json');
    };
    $max = opt($o, 'max-jobs');
    $c->work(opt($o, 'kind'), $handler, tenants: $o['tenant'] ?? [], wait: (int) opt($o, 'wait', '5'),
        maxJobs: $max === null ? null : (int) $max, untilEmpty: !empty($o['until-empty']),
        onOutcome: fn (Claim $claim, array $x) => out(['job' => $x['id'], 'state' => $x['state'], 'attempt' => $x['attempt'],
            'extensions' => $claim->extensions(), 'reason' => $x['reason'] ?? '']));
}

function result(Client $c, int $job, string $file, array $o): void
{
    $j = $c->wait($job, timeout: (float) opt($o, 'timeout', '600'));
    $r = $c->fetchResult($job, $file);
    $doc = ['job' => $job, 'state' => $j['state'], 'sha256' => $r['sha256'], 'size' => $r['size']];
    if (str_starts_with($r['content_type'] ?? '', 'application/json')) {
        $doc['result'] = json_decode(file_get_contents($file), true);
    }
    out($doc);
}

function main(array $argv): int
{
    $cmd = $argv[1] ?? '';
    [$o, $pos] = parse_args(array_slice($argv, 2));
    $c = new Client();
    try {
        match ($cmd) {
            'submit' => submit($c, $o, $pos),
            'work' => work($c, $o),
            'status' => out($c->job((int) $pos[0])),
            'result' => result($c, (int) $pos[0], $pos[1], $o),
            default => throw new InvalidArgumentException('usage: php example.php submit|work|status|result ...'),
        };
    } catch (ApiError $e) {
        out(['error' => $e->toArray()]);
        return 1;
    } catch (PayloadCorruptError $e) {
        out(['error' => ['status' => 0, 'reason' => PayloadCorruptError::REASON, 'message' => $e->getMessage(), 'permanent' => true]]);
        return 1;
    } catch (InvalidArgumentException $e) {
        fwrite(STDERR, $e->getMessage() . "\n");
        return 2;
    }
    return 0;
}

exit(main($argv));
