// Connects to Ragline's MCP server with the official TypeScript SDK, lists the tools and
// searches: node sdk_client.mjs <url of /mcp> <question>, the token in RAGLINE_TOKEN.
// It prints one line of JSON ({tools, result} or {error, status}) and exits 1 on an error;
// tests/e2e/test_mcp_clients.py runs it, and docs/mcp-clients.md shows it from `import` on.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, question] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${process.env.RAGLINE_TOKEN}` } },
});
const client = new Client({ name: "my-agent", version: "1.0.0" });
try {
  await client.connect(transport);
  const { tools } = await client.listTools();
  const result = await client.callTool({
    name: "knowledge_search",
    arguments: { query: question, top_k: 5 },
  });
  console.log(JSON.stringify({ tools: tools.map((tool) => tool.name), result }));
} catch (error) {
  console.log(JSON.stringify({ error: String(error), status: error.code }));
  process.exitCode = 1;
} finally {
  await client.close();
}
