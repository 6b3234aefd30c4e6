"""Slurm's step variables, read as TensorFlow's SlurmClusterResolver reads them: ranks, task counts,
hosts, ports. A leaf: the caller passes the strategy's record, which knows its cluster's jobs."""
from __future__ import annotations

import subprocess
from typing import Dict, List, Optional

from omegaconf import DictConfig

from distexp.errors import UserError

# Slurm's per-step variables: set inside `srun` (and submitit's tasks), absent in a batch script.
SLURM_STEP_VARS = ("SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_STEP_NODELIST",
                   "SLURM_STEP_TASKS_PER_NODE")

# Ports of a Slurm job when cluster.port is null: a block per job and step, below Linux's ephemeral
# range (32768-60999), so two jobs on one node never share one (the resolver's fixed default, 8888,
# made concurrent jobs collide). Task k on a node listens on block start + k.
SLURM_PORT_FIRST, SLURM_PORT_BLOCK, SLURM_PORT_BLOCKS = 10000, 32, 700


def slurm_port_base(cfg: DictConfig, env) -> int:
    """The resolver's port_base: cluster.port, else a block derived from the job and step ids
    (every task of a step computes the same one; consecutive jobs get consecutive blocks)."""
    if cfg.cluster.port:
        return int(cfg.cluster.port)
    job, step = str(env.get("SLURM_JOB_ID") or "0"), str(env.get("SLURM_STEP_ID") or "0")
    job, step = int(job) if job.isdigit() else 0, int(step) if step.isdigit() else 0
    return SLURM_PORT_FIRST + SLURM_PORT_BLOCK * ((job * 4 + step % 4) % SLURM_PORT_BLOCKS)


def slurm_step(env):
    """(this task's rank, the step's task count) from Slurm's step variables, or one line saying
    why this process is not a task of a Slurm step."""
    missing = [v for v in SLURM_STEP_VARS if not env.get(v)]
    if missing and env.get("SLURM_NTASKS"):
        raise UserError(f"cluster: received 'slurm' in a Slurm job (SLURM_JOB_ID="
                        f"{env.get('SLURM_JOB_ID', '?')}, SLURM_NTASKS={env['SLURM_NTASKS']}) but "
                        f"outside a job step ({', '.join(missing)} not set): a batch script must "
                        "start the tasks with srun: `srun python -m distexp ... cluster=slurm`")
    if missing:
        raise UserError(f"cluster: received 'slurm' but {', '.join(missing)} are not set: this is "
                        "not a Slurm task; run it under srun (`srun -n2 python -m distexp ...`) or "
                        "with hydra/launcher=slurm")
    try:
        return int(env["SLURM_PROCID"]), int(env["SLURM_STEP_NUM_TASKS"])
    except ValueError:
        raise UserError(f"SLURM_PROCID / SLURM_STEP_NUM_TASKS: received {env['SLURM_PROCID']!r} / "
                        f"{env['SLURM_STEP_NUM_TASKS']!r}; expected integers") from None


def slurm_jobs(cfg: DictConfig, ntasks: int, record) -> Dict[str, int]:
    """The `jobs` argument of SlurmClusterResolver for this strategy (its record's cluster);
    `workers` (and `ps`) must match the tasks Slurm started, never silently train another cluster
    than asked."""
    jobs, need = record.jobs(cfg), record.tasks(cfg)
    if ntasks != need:
        keys = record.count_keys()
        what = " ".join(f"{k}={cfg[k]}" for k in keys)
        if len(jobs) > 1:
            what += f" ({' + '.join(f'{n} {j}' for j, n in jobs.items())})"
        others = need - int(cfg.workers)  # tasks that do not follow `workers`
        fix = (f"workers={ntasks - others}" if ntasks - others >= 1 else
               f"{' '.join(f'{k}=1' for k in keys)} with at least {len(jobs)} tasks")
        raise UserError(f"workers: received {what}, which needs {need} Slurm tasks; this step has "
                        f"{ntasks} (SLURM_STEP_NUM_TASKS). Set {fix}, or start {need} tasks "
                        f"(srun -n{need}; hydra/launcher=slurm follows workers by itself)")
    return jobs


def slurm_addresses(cfg: DictConfig, env, record) -> Dict[str, str]:
    """Task name -> address, as SlurmClusterResolver.cluster_spec() computes them: hosts sorted,
    task k on a host at port_base + k, ranks over the job names in alphabetical order."""
    hosts = slurm_hosts(env["SLURM_STEP_NODELIST"])
    per_host = []
    for part in env["SLURM_STEP_TASKS_PER_NODE"].split(","):
        n, _, times = part.partition("(x")
        per_host += [int(n)] * int(times.rstrip(")") or 1)
    base = slurm_port_base(cfg, env)
    addrs = [f"{h}:{base + k}" for h, n in sorted(zip(hosts, per_host)) for k in range(n)]
    jobs = slurm_jobs(cfg, len(addrs), record)
    names = [("chief" if kind == "chief" else f"{kind}-{i}") for kind in sorted(jobs)
             for i in range(jobs[kind])]
    return dict(zip(names, addrs))


def check_placement(env, rank: int) -> None:
    """The resolver numbers tasks node by node (block): a task placed otherwise (srun -m cyclic,
    plane, arbitrary) would be given another node's address. One line instead of a hang."""
    here = env.get("SLURMD_NODENAME")
    if not here:
        return
    hosts = slurm_hosts(env["SLURM_STEP_NODELIST"])
    per_host = []
    for part in env["SLURM_STEP_TASKS_PER_NODE"].split(","):
        n, _, times = part.partition("(x")
        per_host += [int(n)] * int(times.rstrip(")") or 1)
    nodes = sorted(zip(hosts, per_host))
    block = [h for h, n in nodes for _ in range(n)]
    dist = str(env.get("SLURM_DISTRIBUTION") or "block").split(":")[0]
    if dist not in ("block", "") and len(nodes) > 1 and _layout(dist, nodes) != block:
        # every task computes the same answer, so all stop (a task that alone stopped would leave
        # the others waiting on it)
        raise UserError(f"SLURM_DISTRIBUTION: received {dist!r}, which places this step's tasks "
                        f"other than node by node; TensorFlow's SlurmClusterResolver assumes node "
                        f"by node and would give tasks another node's address: start the step with "
                        f"srun --distribution=block")
    if rank < len(block) and block[rank] != here:
        raise UserError(f"SLURM_PROCID: received task {rank} on node {here}; TensorFlow's "
                        f"SlurmClusterResolver places it on {block[rank]} (tasks numbered node by "
                        f"node): start the step with srun --distribution=block (not "
                        f"{env.get('SLURM_DISTRIBUTION') or 'another layout'})")


def _layout(dist: str, nodes) -> Optional[List[str]]:
    """The node of each rank under Slurm's `cyclic` distribution (round robin over the nodes that
    still have tasks); None for a layout not computed here (plane, arbitrary)."""
    if dist != "cyclic":
        return None
    left, order = dict(nodes), []
    while any(left.values()):
        for h, _ in nodes:
            if left[h]:
                order.append(h)
                left[h] -= 1
    return order


def slurm_hosts(nodelist: str) -> List[str]:
    """A Slurm node list (`n[1-3],m5`) as host names, as the resolver expands it."""
    if "[" not in nodelist:
        return [h for h in nodelist.split(",") if h]
    try:
        out = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True,
                             text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError) as ex:
        raise UserError(f"SLURM_STEP_NODELIST: received {nodelist!r}, which `scontrol show "
                        f"hostnames` could not expand ({ex})") from None
    return out.split()
