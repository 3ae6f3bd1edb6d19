// Drives the npm package sns-sqs-big-payload for npm_test.go (a test
// program, not shipped): node npm-driver.js produce|consume, with its
// settings as JSON in the environment variable NPM_DRIVER.
//   produce: sends each of cfg.sizes as sendJSON({data: "<n x's>"}) and
//            prints {"sha256","size"} of each message body it sent.
//   consume: receives until cfg.count messages were handled or
//            cfg.timeoutMs passed, and prints {"sha256","size","pointer"}
//            of each payload handed to the handler ("pointer": the payload
//            looks like pointer JSON, i.e. the package failed to fetch it).
'use strict';
const crypto = require('crypto');
const aws = require('aws-sdk');
const { SqsProducer, SqsConsumer } = require('sns-sqs-big-payload');

const cfg = JSON.parse(process.env.NPM_DRIVER);
const sqs = new aws.SQS({ endpoint: cfg.sqsEndpoint, region: cfg.region });
const s3 = new aws.S3({ endpoint: cfg.s3Endpoint, region: cfg.region, s3ForcePathStyle: true });
const sha = (b) => crypto.createHash('sha256').update(b).digest('hex');

async function produce() {
  const p = SqsProducer.create({
    queueUrl: cfg.queueUrl, sqs, s3, s3Bucket: cfg.bucket,
    largePayloadThoughS3: true, extendedLibraryCompatibility: cfg.compat,
  });
  for (const n of cfg.sizes) {
    // sendJSON sends JSON.stringify(msg): {"data":"…"} is n bytes.
    const msg = { data: 'x'.repeat(n - '{"data":""}'.length) };
    const body = JSON.stringify(msg);
    await p.sendJSON(msg);
    console.log(JSON.stringify({ sha256: sha(body), size: Buffer.byteLength(body) }));
  }
}

async function consume() {
  let handled = 0;
  const c = SqsConsumer.create({
    queueUrl: cfg.queueUrl, sqs, s3, getPayloadFromS3: true, waitTimeSeconds: 1,
    extendedLibraryCompatibility: cfg.compat,
    handleMessage: async ({ payload }) => {
      const b = Buffer.isBuffer(payload) ? payload : Buffer.from(String(payload));
      const s = b.toString('utf8', 0, Math.min(b.length, 200));
      const pointer = s.includes('PayloadS3Pointer') || s.includes('"S3Payload"') || s.includes('s3BucketName');
      console.log(JSON.stringify({ sha256: sha(b), size: b.length, pointer }));
      handled++;
    },
  });
  c.on('processing-error', ({ err }) => console.error('processing-error: ' + err));
  c.on('error', (err) => console.error('error: ' + err));
  c.start();
  const end = Date.now() + cfg.timeoutMs;
  while (handled < cfg.count && Date.now() < end) await new Promise((r) => setTimeout(r, 100));
  c.stop();
}

(process.argv[2] === 'produce' ? produce() : consume()).catch((e) => { console.error(e); process.exit(1); });
