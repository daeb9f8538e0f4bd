// Capture what @ag-ui/mastra emits for Mastra tool suspensions and approvals, offline: a local
// Mastra agent with a scripted stand-in for the model (an AI SDK LanguageModelV2, no network)
// and Mastra's in-memory storage, served over HTTP in process the way an AG-UI server does it
// (each event of `MastraAgent.run(input)` encoded by @ag-ui/encoder; the response simply ends
// when the run's Observable errors, since the adapter sends no RUN_ERROR).
//
// Usage: node capture.mjs OUTDIR   (with the packages of package.json beside this file)
// Writes mastra-<scenario>.ndjson files. Each line is either the RunAgentInput posted to start
// or resume a run (an object with threadId, runId, messages and no "type"), or an AG-UI event
// exactly as the server streamed it (the SSE `data:` payload).

import { mkdirSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { join } from "node:path";
import { EventEncoder } from "@ag-ui/encoder";
import { getLocalAgent } from "@ag-ui/mastra";
import { Agent } from "@mastra/core/agent";
import { Mastra } from "@mastra/core";
import { InMemoryStore } from "@mastra/core/storage";
import { createTool } from "@mastra/core/tools";
import { z } from "zod";

const REFUND = [["call_refund_1", "issueRefund", { order: "A-1", amount: 20 }]];
const TWO_REFUNDS = [
  ["call_refund_a", "issueRefund", { order: "A-1", amount: 20 }],
  ["call_refund_b", "issueRefund", { order: "B-2", amount: 35 }],
];
const DELETE = [["call_del_1", "deleteFile", { path: "/tmp/demo.txt" }]];

// What the user text asks for, by keyword: the scripted tool calls.
function callsFor(text) {
  if (text.includes("two refunds")) return TWO_REFUNDS;
  if (text.includes("refund")) return REFUND;
  if (text.includes("delete")) return DELETE;
  return null;
}

function textOf(message) {
  const c = message.content;
  if (typeof c === "string") return c;
  return c
    .filter((p) => p.type === "text")
    .map((p) => p.text)
    .join(" ");
}

const usage = { inputTokens: 1, outputTokens: 1, totalTokens: 2 };

// A LanguageModelV2 that answers a user text asking for work with the scripted tool calls, a
// tool result with a short text, anything else "You are welcome.".
const model = {
  specificationVersion: "v2",
  provider: "scripted",
  modelId: "scripted-fake",
  supportedUrls: {},
  async doGenerate() {
    throw new Error("the scripted model only streams");
  },
  async doStream({ prompt }) {
    const last = prompt[prompt.length - 1];
    const calls = last.role === "user" ? callsFor(textOf(last).toLowerCase()) : null;
    const parts = [{ type: "stream-start", warnings: [] }];
    if (calls) {
      for (const [toolCallId, toolName, args] of calls) {
        parts.push({ type: "tool-call", toolCallId, toolName, input: JSON.stringify(args) });
      }
      parts.push({ type: "finish", finishReason: "tool-calls", usage });
    } else {
      const text = last.role === "tool" ? "Finished the request." : "You are welcome.";
      parts.push({ type: "text-start", id: "t" });
      parts.push({ type: "text-delta", id: "t", delta: text });
      parts.push({ type: "text-end", id: "t" });
      parts.push({ type: "finish", finishReason: "stop", usage });
    }
    const stream = new ReadableStream({
      start(controller) {
        for (const p of parts) controller.enqueue(p);
        controller.close();
      },
    });
    return { stream };
  },
};

// A tool that suspends until a human answers { approved }; then it runs (or not).
const issueRefund = createTool({
  id: "issueRefund",
  description: "Refund an order (asks a human first).",
  inputSchema: z.object({ order: z.string(), amount: z.number() }),
  suspendSchema: z.object({ question: z.string() }),
  resumeSchema: z.object({ approved: z.boolean() }),
  execute: async (input, context) => {
    const agent = context.agent;
    if (!agent?.resumeData) {
      await agent.suspend({ question: `Refund order ${input.order}?` });
      return undefined;
    }
    return agent.resumeData.approved ? `refunded ${input.order}` : `kept ${input.order}`;
  },
});

// A tool Mastra itself asks approval for before running it.
const deleteFile = createTool({
  id: "deleteFile",
  description: "Delete a file.",
  inputSchema: z.object({ path: z.string() }),
  requireApproval: true,
  execute: async (input) => `deleted ${input.path}`,
});

function newAgent() {
  const ops = new Agent({
    id: "ops",
    name: "ops",
    instructions: "You run operations.",
    model,
    tools: { issueRefund, deleteFile },
  });
  const mastra = new Mastra({ agents: { ops }, storage: new InMemoryStore(), logger: false });
  return getLocalAgent({ mastra, agentId: "ops", resourceId: "capture" });
}

// The AG-UI server: one agent, POST a RunAgentInput, get its events as SSE.
function serve(agent) {
  const encoder = new EventEncoder();
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", () => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      agent.run(JSON.parse(body)).subscribe({
        next: (event) => res.write(encoder.encode(event)),
        error: (err) => {
          process.stderr.write(`run failed: ${err?.message ?? err}\n`);
          res.end();
        },
        complete: () => res.end(),
      });
    });
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

class Client {
  constructor(name) {
    this.name = name;
    this.threadId = `thread-mastra-${name}`;
    this.lines = [];
    this.history = [];
    this.interrupts = []; // ids of the last run's interrupts
    this.n = 0;
  }

  async start() {
    this.server = await serve(newAgent());
    this.url = `http://127.0.0.1:${this.server.address().port}/`;
  }

  async run({ user, resume } = {}) {
    this.n += 1;
    if (user !== undefined) {
      this.history.push({ id: `user-${this.n}`, role: "user", content: user });
    }
    const input = {
      threadId: this.threadId,
      runId: `run-${this.n}`,
      state: {},
      messages: [...this.history],
      tools: [],
      context: [],
      forwardedProps: {},
    };
    if (resume !== undefined) input.resume = resume;
    this.lines.push(JSON.stringify(input));
    this.interrupts = [];
    const r = await fetch(this.url, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "text/event-stream" },
      body: JSON.stringify(input),
    });
    const text = await r.text();
    for (const raw of text.split("\n")) {
      if (!raw.startsWith("data: ")) continue;
      const line = raw.slice("data: ".length);
      this.lines.push(line);
      const ev = JSON.parse(line);
      if (ev.type === "RUN_FINISHED" && ev.outcome?.type === "interrupt") {
        this.interrupts = ev.outcome.interrupts.map((i) => i.id);
      }
      if (ev.type === "TEXT_MESSAGE_CHUNK" || ev.type === "TEXT_MESSAGE_CONTENT") {
        const id = ev.messageId;
        let msg = this.history.find((m) => m.id === id);
        if (!msg) {
          msg = { id, role: "assistant", content: "" };
          this.history.push(msg);
        }
        msg.content += ev.delta ?? "";
      }
    }
  }

  write(out) {
    writeFileSync(join(out, `mastra-${this.name}.ndjson`), `${this.lines.join("\n")}\n`);
    this.server.close();
  }
}

const resolved = (interruptId, payload) => ({ interruptId, status: "resolved", payload });

async function scenario(out, name, steps) {
  const c = new Client(name);
  await c.start();
  await steps(c);
  c.write(out);
}

async function main(out) {
  mkdirSync(out, { recursive: true });
  const ask = "Please refund order A-1.";
  await scenario(out, "approve", async (c) => {
    await c.run({ user: ask });
    await c.run({ resume: [resolved(c.interrupts[0], { approved: true })] });
  });
  await scenario(out, "decline", async (c) => {
    await c.run({ user: ask });
    await c.run({ resume: [resolved(c.interrupts[0], { approved: false })] });
  });
  await scenario(out, "cancel", async (c) => {
    await c.run({ user: ask });
    await c.run({ resume: [{ interruptId: c.interrupts[0], status: "cancelled" }] });
  });
  await scenario(out, "new-message-no-resume", async (c) => {
    await c.run({ user: ask });
    await c.run({ user: "Actually, never mind. Thanks." });
  });
  await scenario(out, "late-answer-after-later-run", async (c) => {
    await c.run({ user: ask });
    const first = c.interrupts[0];
    await c.run({ user: "Thanks, how are you?" });
    await c.run({ resume: [resolved(first, { approved: true })] });
  });
  // Mastra runs the two calls one after the other: the second is asked in the resuming run,
  // under an interrupt id that carries the first run's id; only the first resume entry is read
  await scenario(out, "two-suspensions", async (c) => {
    await c.run({ user: "Please issue two refunds." });
    const [a] = c.interrupts;
    await c.run({
      resume: [resolved(a, { approved: true }), resolved("run-1::call_refund_b", { approved: true })],
    });
    await c.run({ resume: [resolved(c.interrupts[0], { approved: true })] });
  });
  // a cancel is closed by the adapter alone: is the suspension still there afterwards?
  await scenario(out, "cancel-then-answer", async (c) => {
    await c.run({ user: ask });
    const first = c.interrupts[0];
    await c.run({ resume: [{ interruptId: first, status: "cancelled" }] });
    await c.run({ resume: [resolved(first, { approved: true })] });
  });
  // only the first resume entry is read: an unknown id first fails the run
  await scenario(out, "two-entries-unknown-first", async (c) => {
    await c.run({ user: ask });
    await c.run({
      resume: [resolved("run-1::not-a-call", { approved: true }), resolved(c.interrupts[0], { approved: true })],
    });
  });
  await scenario(out, "wrong-id", async (c) => {
    await c.run({ user: ask });
    await c.run({ resume: [resolved("run-1::not-a-call", { approved: true })] });
  });
  await scenario(out, "require-approval", async (c) => {
    await c.run({ user: "Please delete the demo file." });
    await c.run({ user: "Yes, go ahead." });
  });
}

await main(process.argv[2]);
