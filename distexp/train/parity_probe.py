"""`python -m distexp.parity`'s probe inside the training processes: the gradient norm of the first
batch before training (distexp.parity compares it across strategies at one global batch)."""
from __future__ import annotations


def write_parity(job_dir, ctx) -> None:
    """`python -m distexp.parity`: the gradient norm of the first batch before training, in every
    process of the job (it is a collective); the chief writes it to parity.json."""
    import json

    from distexp.data import loaders
    from distexp.train.step import Step, gradient_norm

    step = Step(ctx.strategy, ctx.task, ctx.model, ctx.optimizer, ctx.global_batch)
    # A pipeline of its own: iterating the training pipeline here would use up its first
    # shuffled pass; a new one with the same seed yields the same first batch.
    first, _ = loaders.pipelines(ctx.cfg, ctx.data, ctx.global_batch)
    batch = next(iter(ctx.strategy.experimental_distribute_dataset(first.take(1))))
    state = [v.numpy() for v in ctx.model.non_trainable_variables]
    norm = gradient_norm(step, ctx.model, batch)
    for v, value in zip(ctx.model.non_trainable_variables, state):  # BatchNorm stats, seeds
        v.assign(value)
    if job_dir is None:
        return
    (job_dir / "parity.json").write_text(json.dumps(
        {"grad_norm": norm, "replicas": int(ctx.strategy.num_replicas_in_sync),
         "global_batch": ctx.global_batch}))
