"""The fault campaign (issue 26): the history it records and the checker that judges it afterwards."""
