from db import fetch_rows


def sync(table):
    return len(fetch_rows(table))
