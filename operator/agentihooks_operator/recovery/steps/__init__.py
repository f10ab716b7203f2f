"""The steps of one lost attempt, each under the journal: fence, release, decide, admit and launch.

A fenced attempt's grant and account slot are released once (the account at the built-in pool or an
external broker), a decision is taken or recorded, and the one replacement is admitted and launched;
a seat's first attempt is admitted the same way. Each step writes through :mod:`..store`.
"""
