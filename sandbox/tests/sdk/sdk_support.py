"""What every SDK conformance test shares: the official clients pointed at the sandbox.

The Rust test `sandbox/tests/conformance/python_sdk.rs` starts an emulator and runs these tests
with the environment below; nothing here starts or stops anything.

- ``SANDBOX_ENDPOINT``: the emulator's base URL (``http://127.0.0.1:PORT``), the SDKs'
  ``base_url``.
- ``SANDBOX_TOKEN``: the bearer token the emulator requires.
- ``SANDBOX_SUBSCRIPTION``, ``SANDBOX_RESOURCE_GROUP``, ``SANDBOX_LOCATION``: where resources go.

The clients keep every default of the SDKs (api-versions, retry, polling), with two exceptions:

- the token goes in a static ``Authorization: Bearer`` header (:class:`StaticBearer`), because
  azure-core's bearer-token policy refuses to send a token over plain HTTP, and the emulator is
  served over HTTP;
- long-running operations poll at the emulator's ``Retry-After`` (the SDKs' way) and at least
  every 0.2 s, instead of the SDKs' 30 s fallback when an answer carries no ``Retry-After``.
"""

import json
import os
import time
import unittest
import urllib.request

from azure.core.credentials import AccessToken
from azure.core.pipeline.policies import SansIOHTTPPolicy
from azure.mgmt.compute import ComputeManagementClient
from azure.mgmt.network import NetworkManagementClient

ENDPOINT = os.environ.get("SANDBOX_ENDPOINT", "")
TOKEN = os.environ.get("SANDBOX_TOKEN", "")
SUBSCRIPTION = os.environ.get("SANDBOX_SUBSCRIPTION", "00000000-0000-0000-0000-0000000000aa")
RESOURCE_GROUP = os.environ.get("SANDBOX_RESOURCE_GROUP", "rg-sdk")
LOCATION = os.environ.get("SANDBOX_LOCATION", "westeurope")
POLLING_INTERVAL = 0.2


class StaticToken:
    """A TokenCredential that always answers the sandbox's token (the clients require one)."""

    def get_token(self, *scopes, **kwargs):
        return AccessToken(TOKEN, int(time.time()) + 3600)


class StaticBearer(SansIOHTTPPolicy):
    """Sends the sandbox's token on every request, polling requests included."""

    def on_request(self, request):
        request.http_request.headers["Authorization"] = f"Bearer {TOKEN}"


def client_options():
    """The keyword arguments every client here is built with."""
    return {
        "base_url": ENDPOINT,
        "authentication_policy": StaticBearer(),
        "polling_interval": POLLING_INTERVAL,
        "raw_request_hook": _record,
    }


def compute():
    """`azure-mgmt-compute` against the sandbox, with the SDK's default api-versions."""
    return ComputeManagementClient(StaticToken(), SUBSCRIPTION, **client_options())


def network():
    """`azure-mgmt-network` against the sandbox, with the SDK's default api-versions."""
    return NetworkManagementClient(StaticToken(), SUBSCRIPTION, **client_options())


def arm_id(provider_type, name, resource_group=RESOURCE_GROUP):
    """The ARM id of `name` of `provider_type` (`Microsoft.Compute/disks`) in the test's group."""
    return (
        f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{resource_group}"
        f"/providers/{provider_type}/{name}"
    )


def sandbox_admin(path, method="GET", body=None):
    """Calls the emulator's own admin API (`/sandbox/...`), returns the decoded JSON answer."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{ENDPOINT}{path}", data=data, method=method)
    request.add_header("Authorization", f"Bearer {TOKEN}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=30) as answer:
        text = answer.read()
    return json.loads(text) if text else None


SENT = []
"""Every request the clients sent, as `(method, url)`, in order (the clients' raw-request hook)."""


def _record(request):
    SENT.append((request.http_request.method, request.http_request.url))


def api_versions_sent(path_part):
    """The api-versions of the requests the clients sent whose path contains `path_part`
    (case-insensitive)."""
    versions = set()
    for _, url in SENT:
        path, _, query = url.partition("?")
        if path_part.lower() not in path.lower():
            continue
        for pair in query.split("&"):
            key, _, value = pair.partition("=")
            if key.lower() == "api-version":
                versions.add(value)
    return versions


class SandboxTestCase(unittest.TestCase):
    """A test case with both clients; fails without an endpoint."""

    @classmethod
    def setUpClass(cls):
        if not ENDPOINT:
            raise RuntimeError(
                "SANDBOX_ENDPOINT is not set: run these tests through `cargo test -p "
                "nodewright-sandbox --test conformance python_sdk`, which starts an emulator"
            )
        cls.compute = compute()
        cls.network = network()

    def unique(self, prefix):
        """A resource name unique to this test method."""
        return f"{prefix}-{self._testMethodName.replace('_', '-')[5:40]}".rstrip("-")
