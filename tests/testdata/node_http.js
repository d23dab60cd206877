// node_http.js server PORT | client PORT N
// The server answers a POST with the sha256 of its body (header x-sha256)
// and a 1 MiB body: the request body repeated. The client makes N
// requests, 4 at a time (4 sockets, reused for queued requests), each
// with 256 KiB of random bytes, checks both, and prints "ok N".
'use strict';
const http = require('http');
const crypto = require('crypto');
const [role, portArg, nArg] = process.argv.slice(2);
const port = Number(portArg);

if (role === 'server') {
  http.createServer((req, res) => {
    const parts = [];
    req.on('data', (c) => parts.push(c));
    req.on('end', () => {
      const body = Buffer.concat(parts);
      const sum = crypto.createHash('sha256').update(body).digest('hex');
      res.writeHead(200, { 'x-sha256': sum, 'content-type': 'application/octet-stream' });
      res.end(Buffer.concat([body, body, body, body]));
    });
  }).listen(port, '127.0.0.1');
} else {
  const n = Number(nArg);
  const agent = new http.Agent({ keepAlive: false, maxSockets: 4 });
  let done = 0;
  const one = () => new Promise((resolve, reject) => {
    const body = crypto.randomBytes(256 << 10);
    const want = crypto.createHash('sha256').update(body).digest('hex');
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/', agent,
      headers: { 'content-length': body.length } }, (res) => {
      const parts = [];
      res.on('data', (c) => parts.push(c));
      res.on('end', () => {
        const got = Buffer.concat(parts);
        if (res.headers['x-sha256'] !== want) return reject(new Error('server hashed another body'));
        if (!got.equals(Buffer.concat([body, body, body, body]))) return reject(new Error('response body differs'));
        done++;
        resolve();
      });
    });
    req.on('error', reject);
    req.end(body);
  });
  Promise.all(Array.from({ length: n }, one)).then(() => {
    console.log(`ok ${done}`);
  }, (e) => { console.error(e); process.exit(1); });
}
