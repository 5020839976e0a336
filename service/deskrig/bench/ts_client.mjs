// Calls tools through the TypeScript MCP SDK's Client, the client most MCP hosts run, and times
// each awaited callTool inside Node, so neither Node's start nor the pipe to the Python bench
// is counted. Driven by deskrig/bench/ts_client.py, in JSON lines:
//   argv[2]: the SDK's package directory (…/node_modules/@modelcontextprotocol/sdk)
//   stdin, first line: {"transport": "http", "url": …} or {"transport": "stdio", "command": …, "args": […], "env": {…}}
//   stdout, first line: {"tools": [names of the tools whose outputSchema the Client cached a validator for]}
//   then per stdin line {"tool": …, "arguments": {…}}: {"ms", "check_ms", "valid", "from_cache"} or {"error"}
// callTool checks structuredContent against the outputSchema only for tools listTools cached
// (ajv, compiled there), so the driver lists the tools first and refuses a tool without one.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';

const sdkDir = process.argv[2];
const exportsMap = JSON.parse(readFileSync(join(sdkDir, 'package.json'), 'utf8')).exports;
// What `import '@modelcontextprotocol/sdk/<subpath>'` loads, resolved through the package's exports.
const sdk = (subpath) => {
  const target = exportsMap[subpath]?.import ?? exportsMap['./*'].import.replace('*', subpath.slice(2));
  return import(pathToFileURL(join(sdkDir, target)).href);
};

const { Client } = await sdk('./client');
const lines = createInterface({ input: process.stdin, crlfDelay: Infinity })[Symbol.asyncIterator]();
const write = (message) => process.stdout.write(JSON.stringify(message) + '\n');

const first = await lines.next();
if (first.done) process.exit(0);
const config = JSON.parse(first.value);
let transport;
if (config.transport === 'http') {
  const { StreamableHTTPClientTransport } = await sdk('./client/streamableHttp.js');
  transport = new StreamableHTTPClientTransport(new URL(config.url));
} else {
  const { StdioClientTransport } = await sdk('./client/stdio.js');
  transport = new StdioClientTransport({ command: config.command, args: config.args, env: config.env });
}
const client = new Client({ name: 'deskrig-bench', version: '1' });
await client.connect(transport);
const { tools } = await client.listTools();
write({ tools: tools.filter((tool) => client.getToolOutputValidator(tool.name)).map((tool) => tool.name) });

for (let line = await lines.next(); !line.done; line = await lines.next()) {
  const { tool, arguments: args } = JSON.parse(line.value);
  const validator = client.getToolOutputValidator(tool);
  if (!validator) {
    write({ error: `the Client cached no outputSchema validator for ${tool}` });
    continue;
  }
  try {
    const started = performance.now();
    const result = await client.callTool({ name: tool, arguments: args });
    const ms = performance.now() - started;
    if (result.isError) {
      write({ error: JSON.stringify(result.content) });
      continue;
    }
    // The Client's own check alone, timed again on the result it has just checked.
    const checkStarted = performance.now();
    const checked = validator(result.structuredContent);
    write({
      ms,
      check_ms: performance.now() - checkStarted,
      valid: checked.valid,
      from_cache: Boolean(result.structuredContent.from_cache),
    });
  } catch (error) {
    write({ error: String(error?.message ?? error) });
  }
}
await client.close();
