from db import fetch_rows


def report(table):
    return len(fetch_rows(table))
