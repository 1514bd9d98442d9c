"""Files out: which chats the ``send_file`` tool can reach, given the channels that run.

A turn's chat can take a file when its channel is running and can send files
(``FileChannel``). Anything else (a scheduled job's own history such as
``cron:job-3``, the heartbeat's, a channel without files) gets None, and the
tool tells the model so instead of sending.
"""

from __future__ import annotations

from collections.abc import Mapping

from bot.core.channel import Channel, FileChannel
from bot.core.messages import SessionKey
from bot.core.tool_api import FileOutlet, SendFile


def file_outlet(channels: Mapping[str, Channel]) -> FileOutlet:
    """The ``FileOutlet`` for turns answered through ``channels``."""

    def sender_for(session: SessionKey) -> SendFile | None:
        channel = channels.get(session.channel)
        return channel.send_file if isinstance(channel, FileChannel) else None

    return sender_for
