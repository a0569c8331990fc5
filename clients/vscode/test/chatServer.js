'use strict';
// The one allowed stand-in for a model: the project's scripted OpenAI-compatible server (tests/chat_server.py),
// run in a Python child process. Every request gets the first scripted reply whose `when` its messages hold (a reply
// without `when` takes any); the child reports how many requests it saw. A reply's stream holds at each GATE of its
// text until the test releases it.
const { spawn } = require('node:child_process');
const path = require('node:path');
const readline = require('node:readline');
const { REPO_ROOT, serverPython } = require('./helpers');

const GATE = '<<gate>>';

const SCRIPT = `
import json, sys, threading
sys.path.insert(0, sys.argv[1])
from chat_server import ChatServer, Reply

class Gated(Reply):
    def stream_pieces(self, body):  # a generator: each part is sent once the gate before it is released
        first, *rest = self.content(body).split("${GATE}")
        yield first
        for gate, part in zip(self.gates, rest):
            gate.wait(120)
            yield part

replies = []
for spec in json.loads(sys.argv[2]):
    gated = "${GATE}" in spec["text"]
    reply = (Gated if gated else Reply)(text=spec["text"], when=spec.get("when"), times=1000)
    reply.gates = [threading.Event() for _ in range(spec["text"].count("${GATE}"))]
    replies.append(reply)

with ChatServer() as chat:
    chat.add(*replies)
    print(json.dumps({"baseUrl": chat.base_url}), flush=True)
    released = [0] * len(replies)
    for line in sys.stdin:
        command, *which = line.split()
        if command == "release":
            k = int(which[0])
            replies[k].gates[released[k]].set()
            released[k] += 1
        print(json.dumps({"requests": len(chat.requests), "released": released}), flush=True)
    for reply in replies:  # the test is over: a stream still held ends
        for gate in reply.gates:
            gate.set()
`;

/** `answer`: the text every request gets, or the replies in order, `{when?, text}` each. */
async function startChatServer(answer) {
    const replies = typeof answer === 'string' ? [{ text: answer }] : answer;
    const child = spawn(serverPython(), ['-c', SCRIPT, path.join(REPO_ROOT, 'tests'), JSON.stringify(replies)], { stdio: ['pipe', 'pipe', 'inherit'] });
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
        /** Lets the held stream of reply `reply` (its place in the replies) go on to its next GATE (or its end). */
        async release(reply = 0) {
            child.stdin.write(`release ${reply}\n`);
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
