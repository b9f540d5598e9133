"""Sun position and clear-sky PV for the demo site (CAT, Machynlleth)."""

from datetime import UTC, datetime, timedelta

import pytest

from demo import solar

LAT, LON = 52.62, -3.84


def _elevation(when: datetime) -> float:
    return solar.solar_elevation_deg(LAT, LON, when)


def test_declination_is_near_its_extremes_at_the_solstices():
    assert solar.declination_deg(172) == pytest.approx(23.45, abs=0.1)  # 21 June
    assert solar.declination_deg(355) == pytest.approx(-23.45, abs=0.1)  # 21 December


def test_midsummer_noon_elevation_is_90_minus_latitude_plus_tilt():
    noon_h = solar.solar_noon_utc_hours(LON, 172)
    noon = datetime(2025, 6, 21, tzinfo=UTC) + timedelta(hours=noon_h)
    assert _elevation(noon) == pytest.approx(90 - LAT + 23.44, abs=0.3)


def test_solar_noon_at_machynlleth_is_about_a_quarter_past_twelve_utc():
    # 3.84° west is 15.4 minutes behind Greenwich; mid-April the equation of time is ~0.
    assert solar.solar_noon_utc_hours(LON, 105) == pytest.approx(12 + 15.4 / 60, abs=0.05)


def test_pv_is_zero_at_night():
    midnight = datetime(2025, 6, 21, 0, 0, tzinfo=UTC)
    assert _elevation(midnight) < 0
    assert solar.clear_sky_ghi(_elevation(midnight)) == 0.0
    assert solar.pv_power_w(solar.clear_sky_ghi(_elevation(midnight)), peak_kw=10) == 0.0


@pytest.mark.parametrize("month_day", [(3, 20), (6, 21), (9, 22), (12, 21)])
def test_clear_sky_pv_peaks_at_solar_noon(month_day):
    month, day = month_day
    start = datetime(2025, month, day, tzinfo=UTC)
    minutes = range(0, 24 * 60, 5)
    power = [
        solar.pv_power_w(solar.clear_sky_ghi(_elevation(start + timedelta(minutes=m))), peak_kw=10)
        for m in minutes
    ]
    peak_minute = minutes[max(range(len(power)), key=power.__getitem__)]
    day_of_year = start.timetuple().tm_yday
    expected = solar.solar_noon_utc_hours(LON, day_of_year) * 60
    assert abs(peak_minute - expected) <= 5
    assert power[0] == 0.0  # midnight


def test_haurwitz_values_match_the_published_curve():
    # Overhead sun: 1098 · exp(−0.057) ≈ 1037 W/m²; 30° elevation: 549 · exp(−0.114) ≈ 490.
    assert solar.clear_sky_ghi(90) == pytest.approx(1037.2, abs=0.5)
    assert solar.clear_sky_ghi(30) == pytest.approx(489.9, abs=0.5)


def test_midsummer_peak_is_far_above_midwinter_peak():
    def noon_ghi(doy_date: datetime) -> float:
        noon_h = solar.solar_noon_utc_hours(LON, doy_date.timetuple().tm_yday)
        return solar.clear_sky_ghi(_elevation(doy_date + timedelta(hours=noon_h)))

    summer = noon_ghi(datetime(2025, 6, 21, tzinfo=UTC))
    winter = noon_ghi(datetime(2025, 12, 21, tzinfo=UTC))
    assert summer > 800
    assert 100 < winter < 300
