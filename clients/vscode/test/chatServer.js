'use strict';
// The one allowed stand-in for a model: the project's scripted OpenAI-compatible server (tests/chat_server.py),
// run in a Python child process. Every request gets `answer`; the child reports how many requests it saw. A stream
// holds at each GATE of the answer until the test releases it.
const { spawn } = require('node:child_process');
const path = require('node:path');
const readline = require('node:readline');
const { REPO_ROOT, serverPython } = require('./helpers');

const GATE = '<<gate>>';

const SCRIPT = `
import json, sys, threading
sys.path.insert(0, sys.argv[1])
from chat_server import ChatServer, Reply
gates = [threading.Event() for _ in range(sys.argv[2].count("${GATE}"))]

class Gated(Reply):
    def stream_pieces(self, body):  # a generator: each part is sent once the gate before it is released
        first, *rest = self.content(body).split("${GATE}")
        yield first
        for gate, part in zip(gates, rest):
            gate.wait(120)
            yield part

with ChatServer() as chat:
    chat.add(Gated(text=sys.argv[2], times=1000) if gates else Reply(text=sys.argv[2], times=1000))
    print(json.dumps({"baseUrl": chat.base_url}), flush=True)
    released = 0
    for line in sys.stdin:
        if line.strip() == "release":
            gates[released].set()
            released += 1
        print(json.dumps({"requests": len(chat.requests), "released": released}), flush=True)
    for gate in gates:  # the test is over: a stream still held ends
        gate.set()
`;

async function startChatServer(answer) {
    const child = spawn(serverPython(), ['-c', SCRIPT, path.join(REPO_ROOT, 'tests'), answer], { stdio: ['pipe', 'pipe', 'inherit'] });
    const lines = readline.createInterface({ input: child.stdout });
    const iterator = lines[Symbol.asyncIterator]();
    const next = async () => {
        const { value, done } = await iterator.next();
        if (done) {
            throw new Error('the chat server exited');
        }
        return JSON.parse(value);
    };
    const exited = new Promise((resolve) => child.once('exit', resolve));
    const { baseUrl } = await next();
    return {
        baseUrl,
        async requestCount() {
            child.stdin.write('count\n');
            return (await next()).requests;
        },
        /** Lets the held stream go on to the next GATE (or its end). */
        async release() {
            child.stdin.write('release\n');
            await next();
        },
        /** Stops the server (a stream still held ends); once stopped, resolves at once. */
        close() {
            child.stdin.end();
            return exited;
        },
    };
}

module.exports = { GATE, startChatServer };
