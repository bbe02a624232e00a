"""nose.tools"""
import functools
import unittest

_case = unittest.TestCase("__init__")
assert_raises = _case.assertRaises
assert_equal = eq_ = _case.assertEqual
assert_not_equal = _case.assertNotEqual
assert_true = _case.assertTrue
assert_false = _case.assertFalse
assert_almost_equal = _case.assertAlmostEqual
assert_in = _case.assertIn
assert_is = _case.assertIs
assert_is_none = _case.assertIsNone
assert_is_not_none = _case.assertIsNotNone
assert_greater = _case.assertGreater
assert_less = _case.assertLess
__all__ = ["assert_raises", "assert_equal", "eq_", "ok_", "raises", "make_decorator", "with_setup",
           "assert_true", "assert_false", "assert_not_equal", "assert_almost_equal", "assert_in", "assert_is",
           "assert_is_none", "assert_is_not_none", "assert_greater", "assert_less"]


def ok_(expr, msg=None):
    if not expr:
        raise AssertionError(msg)


def make_decorator(func):
    def decorate(newfunc):
        return functools.wraps(func)(newfunc)
    return decorate


def raises(*exceptions):
    def decorate(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            try:
                func(*args, **kwargs)
            except exceptions:
                return
            raise AssertionError(f"{func.__name__}() did not raise {' or '.join(e.__name__ for e in exceptions)}")
        wrapper.expected_exceptions = exceptions
        return wrapper
    return decorate


def with_setup(setup=None, teardown=None):
    def decorate(func):
        return func
    return decorate
