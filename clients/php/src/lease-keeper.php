<?php
/**
 * The lease keeper of a claim (started by Claim::run with proc_open; not a
 * program to run by hand): every CLAIMCHECK_KEEPER_EVERY seconds it extends
 * the lease CLAIMCHECK_KEEPER_LEASE at CLAIMCHECK_API_URL (token
 * CLAIMCHECK_API_TOKEN) and prints {"lease_expires_at": …} a line, until its
 * standard input closes (the attempt's outcome is recorded) or the lease is
 * gone (404: it prints {"lost": {status, reason, message, permanent}} and
 * exits). An unreachable server is tried again at the next tick.
 */

declare(strict_types=1);

require __DIR__ . '/ClaimCheck.php';

use ClaimCheck\ApiError;
use ClaimCheck\Claim;
use ClaimCheck\Client;

$every = (float) getenv('CLAIMCHECK_KEEPER_EVERY');
$client = new Client(null, getenv('CLAIMCHECK_API_TOKEN') ?: null, (float) (getenv('CLAIMCHECK_KEEPER_TIMEOUT') ?: 60));
$claim = new Claim($client, ['lease' => getenv('CLAIMCHECK_KEEPER_LEASE'), 'lease_seconds' => 0, 'lease_expires_at' => '', 'job' => [], 'payload' => []]);
$next = hrtime(true) / 1e9 + $every;
while (true) {
    $left = max($next - hrtime(true) / 1e9, 0);
    $r = [STDIN];
    $w = $e = null;
    $n = stream_select($r, $w, $e, (int) $left, (int) (($left - (int) $left) * 1e6));
    if ($n === false) {
        exit(1);
    }
    if ($n > 0) {
        if (fread(STDIN, 8192) === '' && feof(STDIN)) {
            exit(0); // the attempt is over
        }
        continue;
    }
    $next += $every;
    try {
        $doc = $claim->extend();
        fwrite(STDOUT, json_encode(['lease_expires_at' => $doc['lease_expires_at'] ?? '']) . "\n");
    } catch (ApiError $err) {
        if ($err->status === 404) {
            fwrite(STDOUT, json_encode(['lost' => $err->toArray()]) . "\n");
            exit(0);
        }
        // Unreachable for a moment: try again at the next tick.
    }
}
