"""A fake Slack (Web API, Socket Mode, signed HTTP delivery) for tests: see ``server.py``."""

from tests.fake_slack.http_events import HttpAnswer, post_event, signature, signed_headers
from tests.fake_slack.payloads import url_verification
from tests.fake_slack.records import Ack, ApiCall, Delivery, Envelope, Injection
from tests.fake_slack.server import ALICE, ALICE_DM, BOB, BOB_DM, GENERAL, FakeSlack

__all__ = [
    "ALICE",
    "ALICE_DM",
    "BOB",
    "BOB_DM",
    "GENERAL",
    "Ack",
    "ApiCall",
    "Delivery",
    "Envelope",
    "FakeSlack",
    "HttpAnswer",
    "Injection",
    "post_event",
    "signature",
    "signed_headers",
    "url_verification",
]
