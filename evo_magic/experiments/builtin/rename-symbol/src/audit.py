from db import fetch_rows


def audit(table):
    return len(fetch_rows(table))
