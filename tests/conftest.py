"""Shared fixtures."""
import pytest


@pytest.fixture
def one_torch_thread():
    """Tiny models gain nothing from a second thread, and on a shared 2-core machine OpenMP's
    spin-waiting made the reward-model tests ~15x slower (250 s instead of 15 s). Restored
    afterwards."""
    import torch
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def benchmark_script():
    """Load a script of benchmarks/ by name as a module (the folder is not a package)."""
    import importlib.util
    from pathlib import Path
    folder = Path(__file__).resolve().parents[1] / "benchmarks"

    def load(name: str):
        spec = importlib.util.spec_from_file_location(name, folder / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    return load


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    """A random 2-layer Llama with a character tokenizer, written once per session (files
    that need another size define their own)."""
    from rlvr.trainer.models.tiny import build_tiny_model
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


# The slow tier: `pytest -m "not slow"` runs the rest in about two minutes for day-to-day work;
# `.ci/run` runs everything. One table, by test file or test name (parametrised ids included),
# so a slow test is marked where anyone looks for the tiers, not scattered through the files.
SLOW = (
    "test_distributed.py",                                   # torchrun, two processes per test
    "test_wheel_install.py",          # builds a wheel, installs it, loads, scores, trains a step
    "test_fsdp.py::test_two_sharded_ranks_train_like_one_process_and_resume_on_one",  # torchrun
    "test_fsdp.py::test_lora_adapters_train_sharded",        # torchrun, FSDP2 on two gloo ranks
    "test_reward_model_train.py",                            # trains reward models
    "test_trainer.py::test_every_preset_trains_through_the_cli",
    "test_trainer.py::test_resume_is_exact",
    "test_integrations.py::test_trl_grpo_trainer_runs_one_step_on_rlvr_rewards",
    "test_serve.py::test_trl_grpo_trainer_trains_against_rlvr_serve",     # TRL, 2 steps, a server
    "test_serve.py::test_the_rlvr_serve_command_serves_until_stopped",    # a server process
    # other libraries' environments scored in pool workers (each imports the library) and trained
    "test_interop_envs.py::test_rlvr_score_and_audit_run_on_a_verifiers_environment",
    "test_interop_envs.py::test_rlvr_train_and_eval_run_on_a_verifiers_environment",
    "test_interop_envs.py::test_rlvr_score_and_train_run_on_an_openenv_environment",
    "test_r1zero.py::test_r1zero_script_tiny_mode_runs_trains_and_plots",
    "test_monitor_demo.py::test_the_demo_runs_both_arms_on_a_tiny_model",   # two tiny runs
    "test_r1zero.py::test_a_run_folder_is_resumed_refused_or_overwritten_never_clobbered",
    "test_trainer_options.py::test_lora_checkpoint_holds_adapters_and_resumes_exactly",
    "test_trainer_options.py::test_export_merges_lora_into_a_transformers_folder",
    "test_trainer_options.py::test_lora_reference_is_the_base_with_adapters_off",
    "test_trainer_options.py::test_checkpointing_changes_no_metric",
    "test_multiturn_train.py::test_multiturn_resume_is_exact",
    "test_multiturn_train.py::test_every_preset_trains_on_episodes",
    "test_scoring.py::test_resume_after_kill_has_every_row_exactly_once",
    "test_verified_data.py::test_the_command_killed_mid_run_resumes_without_duplicates",
    "test_code_formats.py::test_rlvr_score_humaneval_reports_every_bad_program_as_ok_0_with_its_limit",
    "test_trainer_verdicts.py",                             # a trainer on HumanEval, sandboxed
    "test_ray_backend.py",                                  # starts Ray
    "test_transformers_range.py::test_the_lowest_declared_transformers_runs_the_contract_and_a_training_step",
    "test_sandbox_attacks.py",                              # each attack on both backends
    # whole-dataset and multi-second integration checks (3-6 s each on an idle machine)
    "test_math_verifier.py::test_lite_reader_agrees_with_latex2sympy",
    "test_plots.py::test_compare_overlays_runs_and_cli",
    "test_reward_model.py::test_rlvr_score_reward_model_flag_batches_in_the_pool",
    "test_code_formats.py::test_humaneval_canonical_bodies_pass_and_wrong_bodies_fail",
    "test_code.py::test_humaneval_canonical_solutions_pass_and_corrupted_copies_fail",
    "test_eval_endpoint.py::test_persistent_errors_and_timeouts_fail_the_task_not_the_answer",
    "test_wandb_sink.py::test_rlvr_train_reports_to_wandb_with_the_same_names",
    "test_math_verifier.py::test_timeout_from_asyncio",
    # expert iteration and on-policy distillation: the CLI runs, and the reference-forward twins
    "test_expert_iteration.py::test_expert_iteration_trains_through_the_cli",
    "test_onpolicy_distill.py::test_onpolicy_distill_trains_through_the_cli",
    "test_onpolicy_distill.py::test_the_update_gradient_is_the_hand_computed_reverse_kl[reference]",
    "test_onpolicy_distill.py::test_student_equal_to_teacher_has_exactly_zero_loss_and_gradient[reference]",
    # training runs through the local completions server (tests/server_for_tests.py)
    "test_server_rollouts.py::test_training_through_the_server_syncs_and_measures_the_staleness",
    "test_server_rollouts.py::test_a_server_failing_mid_run_refuses_the_step_and_the_run_resumes",
    "test_server_rollouts.py::test_a_transient_server_error_is_retried",
    "test_sft.py::test_resume_is_exact",                    # three short SFT runs
    "test_sft.py::test_cli_trains_plots_refuses_a_second_run_and_the_run_is_a_model",
    "test_sft.py::test_gradient_checkpointing_and_bf16_train_the_same_step",
    "test_gpu_check.py::test_the_measurement_runs_on_the_cpu",      # a GRPO step in a subprocess
    # the R1 recipe's five stages on the tiny model
    "test_r1_recipe.py::test_every_stage_runs_on_verified_rows_and_a_rerun_skips_them",
    "test_r1_recipe.py::test_an_empty_rejection_set_is_refused_with_the_fix",
    # `rlvr audit` on the environments whose attacks run programs or stall the math reader
    *(f"test_audit.py::test_builtin_environment_audit[{env}]" for env in (
        "code", "code (docker)", "code-stdio", "code-feedback", "humaneval", "mbpp", "math", "math-arithmetic",
        "math-python", "gsm8k", "hendrycks-math", "aime")),
)


def pytest_collection_modifyitems(config, items):
    for item in items:
        node = item.nodeid.split("/")[-1]
        if any(node == s or node.startswith(s + "[") or node.startswith(s + "::")
               or (s.endswith(".py") and node.startswith(s)) for s in SLOW):
            item.add_marker(pytest.mark.slow)
