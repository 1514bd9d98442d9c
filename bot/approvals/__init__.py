"""Approvals: a person's yes or no to one tool call, by button, prompt or ``/approve``.

``store`` keeps requests and "always" rules in SQLite, ``texts`` writes what
people see, ``fit`` checks that a request can be shown whole where it is asked
(it is never cut), and ``service`` ties them to the channels: it posts a
request where the approver will see it, waits for the decision with a timeout,
checks who pressed, and edits the request into a record of what happened.
"""
