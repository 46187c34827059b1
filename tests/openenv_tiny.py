"""A small OpenEnv environment defined by the tests (`openenv:openenv_tiny:SumEnvironment`, or
served): reset(seed) asks for a sum, step(message) is rewarded 1.0 when the message holds it.
'boom' makes the environment raise, 'stall' makes it take 3 s (its own failures)."""
import random
import time
from typing import Optional

from openenv.core.env_server import Action, Environment, Observation, State


class SumAction(Action):
    message: str = ""


class SumObservation(Observation):
    question: str = ""


class SumEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        super().__init__()
        self.answer = None

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None,
              **kwargs) -> SumObservation:
        rng = random.Random(seed)
        a, b = rng.randint(10, 99), rng.randint(10, 99)
        self.answer = a + b
        return SumObservation(question=f"What is {a} + {b}?")

    def step(self, action: SumAction, timeout_s: Optional[float] = None,
             **kwargs) -> SumObservation:
        if "boom" in action.message:
            raise ValueError("environment bug")
        if "stall" in action.message:
            time.sleep(3)
        right = str(self.answer) in action.message
        return SumObservation(done=True, reward=float(right))

    @property
    def state(self) -> State:
        return State()


class GuessObservation(Observation):
    text: str = ""


class GuessEnvironment(Environment):
    """Guess a number from 1 to 9 in up to 3 tries; each wrong guess is told 'higher' or
    'lower'; reward 1.0 for a right guess, 0.0 when the tries run out."""
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        super().__init__()
        self.secret, self.tries = 0, 0

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None,
              **kwargs) -> GuessObservation:
        self.secret, self.tries = random.Random(seed).randint(1, 9), 0
        return GuessObservation(text="Guess my number from 1 to 9.")

    def step(self, action: SumAction, timeout_s: Optional[float] = None,
             **kwargs) -> GuessObservation:
        self.tries += 1
        guess = int("".join(ch for ch in action.message if ch.isdigit()) or 0)
        if guess == self.secret:
            return GuessObservation(text="Right.", done=True, reward=1.0)
        if self.tries >= 3:
            return GuessObservation(text="Out of tries.", done=True, reward=0.0)
        return GuessObservation(text="higher" if guess < self.secret else "lower")

    @property
    def state(self) -> State:
        return State()
