from db import fetch_rows


def export(table):
    return len(fetch_rows(table))
