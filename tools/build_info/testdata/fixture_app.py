from tools.build_info.testdata import fixture_base

print(fixture_base.VALUE)
