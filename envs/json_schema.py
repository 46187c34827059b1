"""`json-schema`: describe an entity as a JSON object matching a generated (or row-supplied)
JSON Schema, checked by the `jsonschema` package (`rlvr.verifiers.structured`).
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any, Mapping

from rlvr.core import Task
from rlvr.envs.registry import register_env
from rlvr.verifiers.parser import ThinkParser
from rlvr.verifiers.structured import JsonSchemaMatch, JsonValid

from .base import Environment, ProceduralSource
from .common import SPLITS, split_of, user_turn

__all__ = ["SchemaSource", "SchemaEnvironment", "json_schema"]

ENTITIES: dict[str, list[tuple[str, str]]] = {
    "person": [("name", "string"), ("age", "integer"), ("email", "string"),
               ("is_member", "boolean"), ("hobbies", "string[]"), ("height_m", "number"),
               ("status", "enum:active|inactive|banned"), ("address", "object:street,city")],
    "book": [("title", "string"), ("author", "string"), ("year", "integer"),
             ("pages", "integer"), ("genres", "string[]"), ("in_print", "boolean"),
             ("rating", "number"), ("format", "enum:hardcover|paperback|ebook")],
    "product": [("name", "string"), ("price", "number"), ("currency", "enum:USD|EUR|GBP"),
                ("in_stock", "boolean"), ("tags", "string[]"), ("sku", "string"),
                ("quantity", "integer"), ("dimensions", "object:width,height")],
    "event": [("title", "string"), ("date", "string"), ("attendees", "integer"),
              ("online", "boolean"), ("speakers", "string[]"), ("venue", "object:name,city"),
              ("kind", "enum:talk|workshop|party"), ("ticket_price", "number")],
    "city": [("name", "string"), ("country", "string"), ("population", "integer"),
             ("area_km2", "number"), ("is_capital", "boolean"), ("landmarks", "string[]"),
             ("climate", "enum:tropical|dry|temperate|cold")],
    "recipe": [("name", "string"), ("servings", "integer"), ("ingredients", "string[]"),
               ("vegetarian", "boolean"), ("minutes", "integer"), ("calories", "number"),
               ("difficulty", "enum:easy|medium|hard")],
}
WORDS = ["Nova", "Atlas", "Maple", "Juniper", "Orion", "Willow", "Cobalt", "Saffron", "Ember"]


def _field_schema(kind: str) -> dict:
    if kind.startswith("enum:"):
        return {"enum": kind[5:].split("|")}
    if kind.startswith("object:"):
        keys = kind[7:].split(",")
        return {"type": "object", "properties": {k: {"type": "string", "minLength": 1}
                                                 for k in keys},
                "required": keys, "additionalProperties": False}
    if kind == "string[]":
        return {"type": "array", "items": {"type": "string"}, "minItems": 1}
    extra = {"string": {"minLength": 1}, "integer": {"minimum": 0}}.get(kind, {})
    return {"type": kind, **extra}


def _field_value(kind: str, rng: random.Random) -> Any:
    if kind.startswith("enum:"):
        return rng.choice(kind[5:].split("|"))
    if kind.startswith("object:"):
        return {k: rng.choice(WORDS) for k in kind[7:].split(",")}
    return {"string": lambda: f"{rng.choice(WORDS)} {rng.choice(WORDS)}",
            "integer": lambda: rng.randint(1, 500), "number": lambda: round(rng.uniform(1, 99), 2),
            "boolean": lambda: rng.random() < 0.5,
            "string[]": lambda: rng.sample(WORDS, rng.randint(1, 3))}[kind]()


@dataclass(frozen=True)
class SchemaSource(ProceduralSource):
    """An entity, 3-6 of its fields, some required, extra keys sometimes forbidden."""
    prefix = "json-schema"
    test_fraction: float = 0.2
    splits: tuple = SPLITS

    def _make(self, split: str, seed: int, index: int) -> Task:
        rng = random.Random(f"json-schema/{seed}/{split}/{index}")
        while True:
            entity = rng.choice(sorted(ENTITIES))
            fields = rng.sample(ENTITIES[entity], rng.randint(3, min(6, len(ENTITIES[entity]))))
            required = [f for f, _ in fields if rng.random() < 0.7] or [fields[0][0]]
            schema = {"type": "object",
                      "properties": {f: _field_schema(k) for f, k in fields},
                      "required": required}
            if rng.random() < 0.5:
                schema["additionalProperties"] = False
            if split_of(json.dumps(schema, sort_keys=True), self.test_fraction) == split:
                break
        gold = {f: _field_value(k, rng) for f, k in fields}
        question = (f"Describe a fictional {entity} as a JSON object that matches this JSON "
                    f"Schema:\n{json.dumps(schema, indent=2)}\nReply with the JSON object only.")
        return Task(id=f"json-schema/{split}/{seed}/{index}", prompt=user_turn(question),
                    answer=schema, metadata={"entity": entity, "reference": gold})


class SchemaEnvironment(Environment):
    """Scoring rows may bring their own schema (`schema`: an object or JSON text)."""

    def task_from_row(self, row: Mapping, id_field: str = "id",
                      answer_field: str = "answer") -> Task:
        if row.get("schema") is not None:
            schema = row["schema"]
            return Task(id=str(row.get(id_field, "")), prompt=row.get("prompt", ""),
                        answer=json.loads(schema) if isinstance(schema, str) else schema)
        return super().task_from_row(row, id_field, answer_field)


@register_env("json-schema")
def json_schema(test_fraction: float = 0.2, partial: bool = False) -> Environment:
    """A JSON object that validates against a JSON Schema (the `jsonschema` package).

    The answer may be bare JSON or one ```json fenced block; `partial=True` gives the fraction
    of the schema's constraints met. Validity alone is logged at weight 0.

    >>> env = json_schema()
    >>> task = env.sample(1)[0]
    >>> env.reward.score(task, env.gold(task)).score
    1.0
    """
    parser = ThinkParser()

    def gold(task: Task) -> str:
        return "```json\n" + json.dumps(task.metadata["reference"], indent=2) + "\n```"
    return SchemaEnvironment(
        name="json-schema", source=SchemaSource(test_fraction), version="1", parser=parser,
        gold=gold, rewards=[(JsonSchemaMatch(parser, partial=partial), 1.0),
                            (JsonValid(parser), 0.0)],
        description="Describe an entity as JSON matching a JSON Schema.")
