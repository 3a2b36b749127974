"""`logagent notify`: delivers analyses from the analyses topic to Slack, webhooks and issue trackers."""

from consumer.notify.service import NotifyConfigError, NotifyService, run_notify

__all__ = ["NotifyConfigError", "NotifyService", "run_notify"]
