"""rl.devops.vast: run harness experiments on rented vast.ai GPUs, with durable results.

Modules, in the order a launch uses them: `api` (the account through the
`vastai` SDK), `offers` (hard gates and the score), `bootstrap` (the onstart
script), `state` (the locked state file and the quarantine), `durability`
(the gate before destroy), `fleet` (launch, status, destroy, reap) and `cli`.
`redact` is the one redaction function every error path passes through.
`testing.fake_api` is a fake vast.ai server for tests. Guide: docs/vast.md.
"""
