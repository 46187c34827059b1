r"""Decide whether a predicted Answer equals the gold Answer.

Two layers share one structure walk:

- `decide(gold, pred)` (no sympy): exact text, plain numbers (exact rationals; decimals to a
  relative 1e-6), text answers, tuples and intervals of plain numbers. Returns `equal=None` when
  only symbolic work can tell -- those pairs go to the worker pool.
- `decide(gold, pred, item_eq=symbolic.item_equal)` in a worker: the same walk, with sympy for
  the items the fast path left open.

Structure rules (docs/math.md): a single-valued gold against several different values is a hedge
(0); multi-part answers match completely; solution lists are unordered, tuples / intervals /
sequences with `\ldots` ordered; labelled parts (`x = 1, y = 2`) match by label.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable, Optional

from .normalize import Answer, Item, Number, base_digits, is_text, key, parse_number

__all__ = ["Decision", "decide", "fast_item_equal", "numbers_equal", "split_tuple", "REL_TOL",
           "Unreadable", "TooLarge", "GoldUnreadable"]

REL_TOL = Fraction(1, 10**6)      # a decimal equals a value to a relative 1e-6 (policy)

Tri = Optional[bool]              # True / False / None (undecided)


class Unreadable(ValueError):
    """The text is not math we can read."""


class TooLarge(ValueError):
    """The text or its value is beyond the bounds we let sympy work on."""


class GoldUnreadable(Unreadable):
    """The gold side could not be read (reported as gold_unparseable)."""


@dataclass(frozen=True)
class Decision:
    """`equal` None = undecided; `status` 'ok', 'unparsed' or 'gold_unparseable'."""
    equal: Tri
    reason: str = ""
    status: str = "ok"


def numbers_equal(a: Number, b: Number) -> bool:
    """Exact forms compare exactly; when either side is a decimal, to a relative 1e-6 and to
    the digits the decimal states: two decimals agree on every digit both state (the finer one
    rounded to the coarser one's last place: `16386.16` != `16386.17`, though only 6e-7 apart);
    an exact value written as a decimal is that value rounded or cut off at the last stated
    place (less than one unit there: 2/3 = `0.6666667` = `0.6666666`, `16386.17` != `16386.16`).

    Fractions throughout, so tiny and huge values never underflow or overflow into "equal".
    """
    if a.digits or b.digits:
        return bool(a.digits) and a.digits == b.digits
    if a.exact and b.exact:
        return a.value == b.value
    if a.value == b.value:
        return True
    diff = abs(a.value - b.value)
    if diff > REL_TOL * max(abs(a.value), abs(b.value)):
        return False
    if a.exact or b.exact:
        return diff < Fraction(10) ** -(b.places if a.exact else a.places)
    return diff <= Fraction(1, 2) * Fraction(10) ** -min(a.places, b.places)


def split_tuple(text: str) -> tuple[str, str, list[str]] | None:
    """'(a, b]' -> ('(', ']', ['a', 'b']) for a bracketed, comma-separated group, else None."""
    if len(text) < 3 or text[0] not in "([" or text[-1] not in ")]":
        return None
    parts, depth, start = [], 0, 1
    for i in range(1, len(text) - 1):
        c = text[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth < 0:
                return None             # '(1)(2)': the first bracket closes early
        elif c == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    if depth != 0 or not parts:
        return None
    parts.append(text[start:-1].strip())
    return text[0], text[-1], parts


def _equation(s: str) -> bool:
    return bool(re.search(r"(?<![<>!\\])=", s))


def _ratio(s: str) -> list[str] | None:
    """'1:2:3' -> ['1', '2', '3'] (ratios and clock times compare part by part)."""
    parts = [p.strip() for p in re.split(r"(?<!\\):", s)]
    return parts if len(parts) > 1 and all(parts) else None


def fast_item_equal(g: str, p: str) -> Tri:
    """One gold value vs one predicted value without sympy; None when it cannot tell."""
    if key(g) == key(p):
        return True
    if _set_literal(g) != _set_literal(p):
        return False                     # {3} is not 3, {\emptyset} is not \emptyset
    based = base_digits(g) or base_digits(p)
    if based and based in (key(g), key(p)):
        return True                      # `101_2` and `101`: the digits, written in the base
    rg, rp = _ratio(g), _ratio(p)
    if rg or rp:
        if not (rg and rp) or len(rg) != len(rp):
            return False
        return _all(fast_item_equal(a, b) for a, b in zip(rg, rp))
    ng, np_ = parse_number(g), parse_number(p)
    if ng and np_:
        return numbers_equal(ng, np_)
    tg, tp = is_text(g), is_text(p)
    if tg and tp:
        return _words(g) == _words(p)
    if (tg and np_) or (tp and ng):
        return False
    sg, sp = split_tuple(g), split_tuple(p)
    if sg and sp:
        if len(sg[2]) != len(sp[2]):
            return False
        if (sg[0], sg[1]) != (sp[0], sp[1]) and (len(sg[2]) == 2 or "[" in sg[0] + sp[0]):
            return False                 # (0,9) vs [0,9): different intervals / tuple types
        return _all(fast_item_equal(a, b) for a, b in zip(sg[2], sp[2]))
    return None


def _set_literal(s: str) -> bool:
    """Is `s` a set written by listing its elements (`\\{3\\}`), other than the empty one?"""
    return s.startswith("\\{") and s.endswith("\\}") and bool(s[2:-2].strip())


def _words(s: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", s.casefold()).split())


def _all(results) -> Tri:
    out: Tri = True
    for r in results:
        if r is False:
            return False
        if r is None:
            out = None
    return out


def _label(s: str) -> str:
    return re.sub(r"[{}\s]", "", s).casefold()


_BARE_NAME = re.compile(r"(?:[a-z]|\\[a-z]+)'*(?:_\w+)?")


def _names_differ(gold_label: str, pred_label: str) -> bool:
    """Do two labels name different things? `a` vs `b`, or a bare variable against a function
    of it (`|x|`, `f(x)` vs `x`). Longer names are not judged: `y` and `f(x)` may name one
    function's value, `AB` and `|AB|` one length."""
    a, b = _label(gold_label), _label(pred_label)
    if not a or not b or a == b:
        return False
    bare_a, bare_b = _BARE_NAME.fullmatch(a), _BARE_NAME.fullmatch(b)
    if bare_a and bare_b:
        return True
    if not (bare_a or bare_b):
        return False
    name, other = (a, b) if bare_a else (b, a)
    return bool(re.search(rf"(?<![a-z\\]){re.escape(name)}(?![a-z])", other))


def _dedupe(items: tuple[Item, ...]) -> list[Item]:
    seen, out = set(), []
    for it in items:
        k = (key(it.text), _label(it.label))
        if k not in seen:
            seen.add(k)
            out.append(it)
    return out


def _match(gs: list[str], ps: list[str], item_eq: Callable[[str, str], Tri]) -> Tri:
    """Unordered, complete matching: a perfect matching of equal pairs (augmenting paths)."""
    n = len(gs)
    table = [[item_eq(g, p) for p in ps] for g in gs]

    def perfect(allow_unknown: bool) -> bool:
        owner = [-1] * n

        def augment(i, seen):
            for j in range(n):
                ok = table[i][j] is True or (allow_unknown and table[i][j] is None)
                if ok and j not in seen:
                    seen.add(j)
                    if owner[j] == -1 or augment(owner[j], seen):
                        owner[j] = i
                        return True
            return False
        return all(augment(i, set()) for i in range(n))

    if perfect(False):
        return True
    return None if perfect(True) else False


def _one(gold: Answer, pred: Answer, item_eq) -> Decision:
    g_items, p_items = _dedupe(gold.items), _dedupe(pred.items)
    if not p_items:
        return Decision(False, "empty answer", "unparsed")
    if len(g_items) == 1 and len(p_items) == 1:
        g, p = g_items[0], p_items[0]
        if _names_differ(g.label, p.label):
            return Decision(False, f"names {p.label!r}, gold names {g.label!r}")
        gt, pt = g.text, p.text
        if g.label and not p.label and _equation(pt):      # y = 2x+1 vs 2x - y + 1 = 0
            gt = f"{g.label}={gt}"
        elif p.label and not g.label and _equation(gt):
            pt = f"{p.label}={pt}"
        r = item_eq(gt, pt)
        return Decision(r, "" if r is not False else "values differ")
    if len(g_items) == 1 or len(p_items) == 1:
        single, many, gold_single = ((g_items[0], p_items, True) if len(g_items) == 1
                                     else (p_items[0], g_items, False))
        tup = split_tuple(single.text)
        if tup and tup[0] == "(" and len(tup[2]) == len(many):   # (1,3) written as {1,3}
            pairs = zip(tup[2], [m.text for m in many]) if gold_single else \
                zip([m.text for m in many], tup[2])
            r = _all(item_eq(a, b) for a, b in pairs)
            if r is not False:
                return Decision(r)
        if gold_single:
            same = _all(item_eq(single.text, p.text) for p in many)
            if same is not False:           # \frac12 and 0.5: one value written twice
                return Decision(same)
            return Decision(False, f"hedged: {len(p_items)} different values for a "
                                   "single-valued gold")
        return Decision(False, f"incomplete: 1 value, gold has {len(g_items)}")
    if len(g_items) != len(p_items):
        return Decision(False, f"{len(p_items)} values, gold has {len(g_items)}")
    g_labels = [_label(i.label) for i in g_items]
    p_labels = [_label(i.label) for i in p_items]
    distinct = all(g_labels) and len(set(g_labels)) == len(g_labels)
    if distinct and all(p_labels):
        stray = [p for p in p_items if all(_names_differ(g.label, p.label) for g in g_items)]
        if stray:
            return Decision(False, f"names {stray[0].label!r}, not one of the gold's")
    if distinct and all(p_labels) and set(p_labels) == set(g_labels):
        by = {lab: it.text for lab, it in zip(p_labels, p_items)}
        r = _all(item_eq(g.text, by[lab]) for lab, g in zip(g_labels, g_items))
    elif (distinct and not any(p_labels)) or gold.ordered or pred.ordered:
        r = _all(item_eq(g.text, p.text) for g, p in zip(g_items, p_items))
    else:
        r = _match([i.text for i in g_items], [i.text for i in p_items], item_eq)
    return Decision(r, "" if r is not False else "parts differ")


def decide(gold: Answer, pred: Answer,
           item_eq: Callable[[str, str], Tri] = fast_item_equal) -> Decision:
    """Equal under any reading of either side (`1,22` is a list or a decimal-comma number)."""
    first_false, undecided = None, False
    for n, g in enumerate(gold.readings()):
        for p in pred.readings():
            try:
                d = _one(g, p, item_eq)
            except GoldUnreadable:
                if n == 0:
                    raise
                continue          # another way the gold states its value, one sympy cannot read
            if d.equal is True:
                return d
            if d.equal is None:
                undecided = True
            elif first_false is None:
                first_false = d
    if undecided:
        return Decision(None)
    return first_false
