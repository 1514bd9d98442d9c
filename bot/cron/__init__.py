"""Scheduled jobs: schedules, storage, the scheduler service."""
