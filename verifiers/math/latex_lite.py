r"""A small LaTeX -> sympy reader for the expressions answers are usually made of.

Why hand-written next to latex2sympy2 (which we use for everything else): the ANTLR parser costs
~20-50 ms per answer and dominates the verifier's time on symbolic answers, while most of them
are short expressions -- numbers, `+ - * / ^`, `\frac`, `\sqrt`, `\pi`, a few functions,
single-letter variables, one relation. This reader handles exactly that grammar in well under a
millisecond and returns None for anything else, which then goes to latex2sympy2. It follows
latex2sympy2's conventions (letters lowercased, `e` is Euler's number, `\log` is base 10,
implicit multiplication) so the two paths agree; a test checks them against each other.

Everything is built unevaluated (`evaluate=False`), so `2^{10^{10}}` is never computed here:
the caller bounds magnitudes before anything is evaluated.
"""
from __future__ import annotations

import re

import sympy

__all__ = ["parse_lite"]

_TOKEN = re.compile(r"\s*(\d+\.\d*|\.\d+|\d+|\\[a-zA-Z]+|[a-zA-Z]|\\[{}]|[-+*/^()!{}=<>,|]|\S)")
_FUNCS = {"\\sin": sympy.sin, "\\cos": sympy.cos, "\\tan": sympy.tan, "\\cot": sympy.cot,
          "\\sec": sympy.sec, "\\csc": sympy.csc, "\\arcsin": sympy.asin,
          "\\arccos": sympy.acos, "\\arctan": sympy.atan, "\\exp": sympy.exp,
          "\\sinh": sympy.sinh, "\\cosh": sympy.cosh, "\\tanh": sympy.tanh}
_INVERSE = {"\\sin": sympy.asin, "\\cos": sympy.acos, "\\tan": sympy.atan}
_RELATIONS = {"=": sympy.Eq, "<": sympy.StrictLessThan, ">": sympy.StrictGreaterThan,
              "\\le": sympy.LessThan, "\\ge": sympy.GreaterThan, "\\ne": sympy.Ne}
_MUL = {"*", "\\cdot", "\\times"}
_ATOM_START = re.compile(r"\d|\.|[a-zA-Z]$|\\(?:frac|sqrt|pi|infty|binom|left|ln|log)$")
MAX_TOKENS = 400
_MIXED = re.compile(r"\d\s*\\frac|\d\s+\d+\s*/\s*\d")   # 1\frac{1}{2}, 2 1/4: mixed numbers
#   (normalize.parse_number reads the plain ones; latex2sympy2 the rest), never products
_WORD = re.compile(r"(?<![\\a-zA-Z])[a-zA-Z]{2,}")    # `sqrt(2)`, `xy`: leave to latex2sympy2


class _Unsupported(Exception):
    pass


def _tokens(text: str) -> list[str]:
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            break
        out.append(m.group(1))
        pos = m.end()
        if len(out) > MAX_TOKENS:
            raise _Unsupported
    return out


class _Reader:
    def __init__(self, tokens: list[str]):
        self.toks, self.i = tokens, 0

    def peek(self, k: int = 0) -> str | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def take(self, want: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (want is not None and tok != want):
            raise _Unsupported
        self.i += 1
        return tok

    # relation := expr (relop expr)*
    def relation(self):
        parts, ops = [self.expr()], []
        while self.peek() in _RELATIONS:
            ops.append(self.take())
            parts.append(self.expr())
        if not ops:
            return parts[0]
        rels = [_RELATIONS[o](a, b, evaluate=False) for o, a, b in zip(ops, parts, parts[1:])]
        return rels[0] if len(rels) == 1 else sympy.And(*rels, evaluate=False)

    def expr(self):
        terms = [self.signed()]
        while self.peek() in ("+", "-"):
            op = self.take()
            t = self.term()
            terms.append(t if op == "+" else sympy.Mul(-1, t, evaluate=False))
        return terms[0] if len(terms) == 1 else sympy.Add(*terms, evaluate=False)

    def signed(self):
        if self.peek() in ("+", "-"):
            op = self.take()
            t = self.signed()
            return t if op == "+" else sympy.Mul(-1, t, evaluate=False)
        return self.term()

    def term(self):
        factors = [self.power()]
        while True:
            tok = self.peek()
            if tok in _MUL:
                self.take()
                factors.append(self.power())
            elif tok == "/":
                self.take()
                factors.append(sympy.Pow(self.power(), -1, evaluate=False))
            elif tok is not None and (_ATOM_START.match(tok) or tok in ("(", "{")
                                      or tok in _FUNCS):
                factors.append(self.power())          # implicit multiplication: 2x, 2\pi r
            else:
                break
        return factors[0] if len(factors) == 1 else sympy.Mul(*factors, evaluate=False)

    def power(self):
        base = self.postfix(self.atom())
        if self.peek() == "^":
            self.take()
            exponent = self.exponent()
            base = sympy.Pow(base, exponent, evaluate=False)
        return base

    def exponent(self):
        tok = self.peek()
        if tok == "{":
            return self.group()
        if tok == "-":
            self.take()
            return sympy.Mul(-1, self.exponent(), evaluate=False)
        if tok is not None and re.fullmatch(r"\d", tok):
            self.take()
            return sympy.Integer(tok)
        if tok is not None and re.fullmatch(r"\d+", tok):    # x^23 in LaTeX is x^2 * 3
            raise _Unsupported
        return self.atom()

    def postfix(self, node):
        while self.peek() == "!":
            self.take()
            node = sympy.factorial(node, evaluate=False)
        return node

    def group(self):
        self.take("{")
        node = self.expr()
        self.take("}")
        return node

    def atom(self):
        tok = self.take()
        if re.fullmatch(r"\d+", tok):
            return sympy.Integer(tok)
        if re.fullmatch(r"\d*\.\d*", tok):
            return sympy.Float(tok, max(15, len(tok) + 2))
        if re.fullmatch(r"[a-zA-Z]", tok):
            if self.peek() == "(":
                raise _Unsupported                    # f(x): a function, not f times x
            return sympy.E if tok == "e" else sympy.Symbol(tok.lower())
        if tok == "(":
            node = self.expr()
            self.take(")")
            return node
        if tok == "{":
            self.i -= 1
            return self.group()
        if tok == "\\pi":
            return sympy.pi
        if tok == "\\infty":
            return sympy.oo
        if tok == "\\frac":
            num = self.group() if self.peek() == "{" else self.digit()
            den = self.group() if self.peek() == "{" else self.digit()
            return sympy.Mul(num, sympy.Pow(den, -1, evaluate=False), evaluate=False)
        if tok == "\\sqrt":
            if self.peek() == "[":
                raise _Unsupported
            arg = self.group() if self.peek() == "{" else self.digit()
            return sympy.Pow(arg, sympy.Rational(1, 2), evaluate=False)
        if tok == "\\binom":
            return sympy.binomial(self.group(), self.group(), evaluate=False)
        if tok in ("\\ln", "\\log"):
            return self.logarithm(tok)
        if tok in _FUNCS:
            return self.function(tok)
        raise _Unsupported

    def digit(self):
        """`\\frac12`: an undelimited argument is one digit (or one letter)."""
        tok = self.take()
        if re.fullmatch(r"\d+", tok):
            if len(tok) > 1:                          # \frac123 = \frac{1}{2}3: push back the rest
                self.toks[self.i - 1:self.i] = [tok[0], tok[1:]]
            return sympy.Integer(tok[0])
        if re.fullmatch(r"[a-zA-Z]", tok):
            return sympy.E if tok == "e" else sympy.Symbol(tok.lower())
        raise _Unsupported

    def function(self, name):
        power = None
        if self.peek() == "^":
            self.take()
            power = self.exponent()
        arg = self.argument()
        if power is not None and name in _INVERSE and power.doit() == -1:
            return _INVERSE[name](arg, evaluate=False)
        out = _FUNCS[name](arg, evaluate=False)
        return out if power is None else sympy.Pow(out, power, evaluate=False)

    def logarithm(self, name):
        base = sympy.E if name == "\\ln" else sympy.Integer(10)
        if name == "\\log" and self.peek() == "_":
            raise _Unsupported                        # tokens never yield "_": kept for clarity
        return sympy.log(self.argument(), base, evaluate=False)

    def argument(self):
        """`\\sin(x)`, `\\sin{x}`, `\\sin 2x` (a product of atoms, up to the next function)."""
        if self.peek() == "(":
            self.take()
            node = self.expr()
            self.take(")")
            return node
        if self.peek() == "{":
            return self.group()
        factors = [self.power()]
        while (tok := self.peek()) is not None and tok not in _FUNCS and tok not in (
                "\\ln", "\\log") and (_ATOM_START.match(tok) or tok == "{"):
            factors.append(self.power())
        return factors[0] if len(factors) == 1 else sympy.Mul(*factors, evaluate=False)


def parse_lite(text: str):
    r"""The sympy value of `text`, unevaluated, or None when it is outside our small grammar.

    >>> parse_lite(r"2^{10} + \frac{1}{2}").doit()
    2049/2
    >>> parse_lite(r"\begin{pmatrix}1\end{pmatrix}") is None
    True
    """
    if "_" in text or "\\\\" in text or "&" in text or _WORD.search(text) \
            or _MIXED.search(text):
        return None                                   # subscripts, matrices, words: not ours
    try:
        reader = _Reader(_tokens(text))
        node = reader.relation()
        if reader.i != len(reader.toks):
            return None
        return node
    except (_Unsupported, TypeError, ValueError, RecursionError):
        return None
