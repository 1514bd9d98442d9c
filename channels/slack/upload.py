"""Files out to Slack: slack_sdk's ``files_upload_v2``, shared in the chat with a caption.

That is Slack's current upload flow: ``files.getUploadURLExternal``, the bytes
posted to the URL it returns, then ``files.completeUploadExternal`` shares the
file in the conversation (in the thread, when there is one) with the caption,
rendered as mrkdwn, as its message. Slack takes files of up to 1 GB. Uploads are
paced with the conversation's messages and retried as ``send.classify`` says.
"""

from __future__ import annotations

from bot.core.channel import DeliveryError
from bot.core.delivery import send_with_retries
from bot.core.messages import OutboundFile
from bot.core.pacing import Pacer
from channels.slack.client import SlackWeb
from channels.slack.format import to_mrkdwn
from channels.slack.send import call, classify

MAX_UPLOAD_BYTES = 1024 * 1024 * 1024


async def send_file(web: SlackWeb, pacer: Pacer, file: OutboundFile) -> None:
    """Upload ``file`` and share it in its conversation; ``DeliveryError`` if Slack won't."""
    if len(file.data) > MAX_UPLOAD_BYTES:
        raise DeliveryError(f"{file.name} is larger than the 1 GB Slack takes")
    comment = to_mrkdwn(file.caption) if file.caption.strip() else None

    async def attempt() -> None:
        async with pacer.slot(file.chat_id):
            await call(
                "files.completeUploadExternal",
                web.client().files_upload_v2(
                    channel=file.chat_id,
                    thread_ts=file.thread_id,
                    file=file.data,
                    filename=file.name,
                    title=file.name,
                    initial_comment=comment,
                ),
            )

    await send_with_retries(attempt, classify, what=f"the file {file.name} to {file.chat_id}")
