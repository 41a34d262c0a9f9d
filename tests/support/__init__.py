"""Helpers shared by every test folder: ``from support.waiting import wait_until``.

pytest puts ``tests/`` on ``sys.path`` (its conftest.py is there and the folder is not a
package), so this package imports the same way from any test.
"""
