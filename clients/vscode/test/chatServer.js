'use strict';
// The one allowed stand-in for a model: the project's scripted OpenAI-compatible server (tests/chat_server.py),
// run in a Python child process. Every request gets `answer`; the child reports how many requests it saw.
const { spawn } = require('node:child_process');
const path = require('node:path');
const readline = require('node:readline');
const { REPO_ROOT, serverPython } = require('./helpers');

const SCRIPT = `
import json, sys
sys.path.insert(0, sys.argv[1])
from chat_server import ChatServer, Reply
with ChatServer() as chat:
    chat.add(Reply(text=sys.argv[2], times=1000))
    print(json.dumps({"baseUrl": chat.base_url}), flush=True)
    for line in sys.stdin:
        print(json.dumps({"requests": len(chat.requests)}), flush=True)
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
    const { baseUrl } = await next();
    return {
        baseUrl,
        async requestCount() {
            child.stdin.write('count\n');
            return (await next()).requests;
        },
        close() {
            return new Promise((resolve) => {
                child.once('exit', resolve);
                child.stdin.end();
            });
        },
    };
}

module.exports = { startChatServer };
