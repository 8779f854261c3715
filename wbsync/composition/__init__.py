"""Where the application is composed: start-up (settings, plugins, the checks that need both),
``wbsync run``'s service, and the workers of the sync queues.
"""
