"""Prices of an order."""


def total(prices, discount_percent=0):
    """The sum of `prices`, less `discount_percent` percent, rounded to cents."""
    if not 0 <= discount_percent <= 100:
        raise ValueError("discount_percent must be between 0 and 100")
    subtotal = sum(prices)
    return round(subtotal - discount_percent, 2)
