"""Test support for rl.devops.vast: `fake_api` (a fake vast.ai HTTP API on 127.0.0.1), `fake_hosts`, `repos`."""
