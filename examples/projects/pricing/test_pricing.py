import unittest

from pricing import total


class TotalTest(unittest.TestCase):
    def test_sum_without_discount(self):
        self.assertEqual(total([10.0, 5.5]), 15.5)

    def test_percentage_discount(self):
        self.assertEqual(total([20.0, 30.0], discount_percent=10), 45.0)

    def test_discount_is_bounded(self):
        with self.assertRaises(ValueError):
            total([1.0], discount_percent=120)


if __name__ == "__main__":
    unittest.main()
