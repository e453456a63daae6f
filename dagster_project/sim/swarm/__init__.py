"""Multi-agent kernel-optimisation episodes (kernelswarm) on top of the session simulator.

The simulator modules one level up own everything physical: GPUs and their feature gates,
ops and shapes, variant ladders and parameter grids, timing, kernel rendering and the
compile / verify / bench harness (``KernelEnv``). This package only adds what a *team*
needs on top of that: what an episode is about (``spec``: task, protocol, team size, the
card's op names), agents with roles and skill (``agents``), a message-level runtime
that schedules their work on a simulated clock (``runtime``), four coordination protocols
(``scenarios``), the card's reward rule (``rewards``) and the invariants a finished episode
must satisfy (``checks``). The public entry points live in ``dagster_project.sim.kernelswarm``.
"""
