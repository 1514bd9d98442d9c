"""The web chat: the panel's Chat page as a chat channel, over plain HTTP and Server-Sent Events."""
