"""A small `verifiers` environment defined by the tests (`verifiers:rlvr-vf-tiny`): sums to
answer in <answer> tags; its reward raises, refuses a connection or stalls on cue words (a
verifiers reward function's own failures, for the statuses rlvr must give them)."""
import asyncio

import verifiers as vf
from datasets import Dataset


async def exact(parser, completion, answer) -> float:
    text = vf.Parser().parse_answer(completion) or ""
    if "boom" in text:
        raise ValueError("reward function bug")
    if "down" in text:
        raise ConnectionRefusedError("judge service unreachable")
    if "stall" in text:
        await asyncio.sleep(30)
    return float(parser.parse_answer(completion) == answer)


def length(completion) -> float:
    """A logged metric (weight 0)."""
    return float(len(vf.Parser().parse_answer(completion) or ""))


def load_environment(n: int = 6) -> vf.Environment:
    rows = [{"question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(n)]
    parser = vf.XMLParser(["answer"], answer_field="answer")
    rubric = vf.Rubric(funcs=[exact, length], weights=[1.0, 0.0], parser=parser)
    return vf.SingleTurnEnv(dataset=Dataset.from_list(rows), eval_dataset=Dataset.from_list(rows),
                            system_prompt="Answer in <answer> tags.", parser=parser,
                            rubric=rubric)
