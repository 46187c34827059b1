"""A small OpenAI-compatible completions server backed by a transformers model, for the tests.

It speaks the part of vLLM's and SGLang's protocol `rollout_engine = "server"` uses: `GET
/v1/models` (with the folder it loaded as `root`, as vLLM reports it), `POST /v1/completions`
with a token-id prompt, n, seed, temperature and `logprobs` (each sampled token's log-prob under
softmax(logits / T), the sampled `token_ids` when `return_token_ids` is set), and the reload
APIs: SGLang's `POST /update_weights_from_disk {"model_path"}` and vLLM's dev-mode `POST
/collective_rpc {"method": "reload_weights"}` (re-reads the folder it serves) plus `POST
/reset_prefix_cache`.

Switches a test sets: `fail_next` (answer the next N completion requests with a 500),
`stall_s` (sleep before answering each completion request), `token_ids = False` (ignore
`return_token_ids`, as vLLM before 0.10.2 does: ids only as `"token_id:N"` logprob tokens).
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import torch


class LocalServer:
    """A threaded HTTP server on 127.0.0.1 that a test runs with `with`: a subclass builds its
    request handler class in `_handler()` and calls `_serve()` at the end of its __init__."""

    def _serve(self) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


class JSONHandler(BaseHTTPRequestHandler):
    """Quiet request handler that answers JSON (`_send`)."""

    def log_message(self, *args):
        pass

    def _send(self, code, payload):
        data = json.dumps(payload).encode()
        try:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass                        # the client gave up (its timeout): expected


class CompletionServer(LocalServer):
    """`with CompletionServer(model_dir) as srv: srv.url` (http://127.0.0.1:PORT/v1)."""

    def __init__(self, model_dir: str | Path, name: str = "tiny"):
        self.model_dir, self.name = Path(model_dir), name
        self.fail_next, self.stall_s, self.token_ids = 0, 0.0, True
        self.requests: list[dict] = []
        self.reloads: list[str] = []
        self.lock = threading.Lock()
        self._load(self.model_dir)
        self._serve()
        # Leaving `with` waits for requests still generating (a stalled one the client gave up
        # on): a daemon thread inside torch when the interpreter exits aborts the process.
        self.httpd.daemon_threads = False

    def _load(self, path: Path) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer
        with self.lock:
            self.model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
            self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.reloads.append(str(path))

    @torch.no_grad()
    def logprobs(self, prompt: list[int], completion: list[int], temperature: float = 1.0):
        """log softmax(logits / T) of each completion token given the prompt (what the server
        reports for a sample)."""
        ids = torch.tensor([prompt + completion])
        with self.lock:
            logits = self.model(input_ids=ids).logits[0, len(prompt) - 1:-1].float()
        logp = torch.log_softmax(logits / temperature, -1)
        return logp.gather(-1, torch.tensor(completion)[:, None]).squeeze(-1).tolist()

    @torch.no_grad()
    def sample(self, body: dict) -> list[dict]:
        """The choices of one completions request: n samples, seeded, stopping at EOS."""
        prompt, n = body["prompt"], body.get("n", 1)
        temperature, max_new = body.get("temperature", 1.0), body.get("max_tokens", 16)
        gen = torch.Generator().manual_seed(body.get("seed") or 0)
        eos = self.model.config.eos_token_id
        seqs = torch.tensor([prompt] * n)
        done, tokens, logps = [False] * n, [[] for _ in range(n)], [[] for _ in range(n)]
        for _ in range(max_new):
            with self.lock:
                logits = self.model(input_ids=seqs).logits[:, -1].float()
            if temperature == 0:
                tok = logits.argmax(-1)
                logp = torch.log_softmax(logits, -1)
            else:
                logp = torch.log_softmax(logits / temperature, -1)
                tok = torch.multinomial(logp.exp(), 1, generator=gen).squeeze(-1)
            for k in range(n):
                if not done[k]:
                    tokens[k].append(int(tok[k]))
                    logps[k].append(float(logp[k, tok[k]]))
                    done[k] = int(tok[k]) == eos
            if all(done):
                break
            seqs = torch.cat([seqs, tok[:, None]], 1)
        return [self._choice(k, tokens[k], logps[k], done[k], body) for k in range(n)]

    def _choice(self, k, tokens, logps, stopped, body) -> dict:
        as_ids = body.get("return_tokens_as_token_ids")
        choice = {"index": k, "text": self.tokenizer.decode(tokens, skip_special_tokens=True),
                  "finish_reason": "stop" if stopped else "length",
                  "logprobs": {"token_logprobs": logps, "text_offset": [0] * len(tokens),
                               "top_logprobs": [None] * len(tokens),
                               "tokens": [f"token_id:{t}" if as_ids else
                                          self.tokenizer.decode([t]) for t in tokens]}}
        if body.get("return_token_ids") and self.token_ids:
            choice["token_ids"] = tokens
        return choice

    def _handler(self):
        server = self

        class Handler(JSONHandler):
            def do_GET(self):
                if self.path.rstrip("/") == "/v1/models":
                    return self._send(200, {"object": "list", "data": [
                        {"id": server.name, "object": "model", "owned_by": "tests",
                         "root": str(server.model_dir)}]})
                self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
                if self.path == "/v1/completions":
                    return self._completions(body)
                if self.path == "/update_weights_from_disk":
                    server._load(Path(body["model_path"]))
                    return self._send(200, {"success": True, "message": "loaded"})
                if self.path == "/collective_rpc" and body.get("method") == "reload_weights":
                    server._load(server.model_dir)
                    return self._send(200, {"results": [None]})
                if self.path == "/reset_prefix_cache":
                    return self._send(200, {})
                self._send(404, {"error": {"message": f"no route {self.path}"}})

            def _completions(self, body):
                with server.lock:
                    server.requests.append(body)
                    fail = server.fail_next > 0
                    server.fail_next -= fail
                if server.stall_s:
                    time.sleep(server.stall_s)
                if fail:
                    return self._send(500, {"error": {"message": "injected failure",
                                                      "type": "server_error"}})
                choices = server.sample(body)
                self._send(200, {"id": "cmpl-test", "object": "text_completion", "created": 0,
                                 "model": body.get("model"), "choices": choices,
                                 "usage": {"prompt_tokens": len(body["prompt"]),
                                           "completion_tokens": 0, "total_tokens": 0}})
        return Handler
